package lesson_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/lesson"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

const (
	ttl  = time.Second
	wait = time.Minute // bounds every wait for what must happen
)

// fixed gives a lock of internal/lock the mistakes' shape, so that the
// same scenario runs against both.
type fixed struct {
	locker lock.Locker
	name   string
	lease  *lock.Lease
}

func (f *fixed) TryLock(ctx context.Context) (bool, error) {
	l, err := f.locker.TryAcquire(ctx, f.name)
	if errors.Is(err, lock.ErrLocked) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f.lease = l
	return true, nil
}

func (f *fixed) Unlock(ctx context.Context) error { return f.lease.Release(ctx) }

// process is one client process: its Redis connection goes through a proxy
// that the test can pause, as SIGSTOP would pause the process.
type process struct {
	*redis.Client
	proxy *testinfra.Proxy
}

func newProcess(t *testing.T, addr string) process {
	p := testinfra.StartProxy(t, addr)
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return process{c, p}
}

// fixedLock returns the correct lock, lock.Redis, in the process.
func (p process) fixedLock(prefix string) *fixed {
	return &fixed{locker: lock.NewRedis(p.Client, &lock.RedisOptions{TTL: ttl, Prefix: prefix}), name: "lock"}
}

// mustLock takes l, retrying until the holder before has lost it.
func mustLock(t *testing.T, l lesson.Lock) {
	t.Helper()
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ok, err := l.TryLock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
	}
	t.Fatalf("lock not taken within %v", wait)
}

var errCrash = errors.New("the process died here")

// TestSetNXThenExpire: the holder dies right after it takes the lock, at
// the first point the lock's code offers. With SETNX then EXPIRE that is
// between the two commands, and the key is left with no expiry: nobody
// will ever take the lock again. With lock.Redis there is no such point;
// dying right after the one command leaves a key that expires.
func TestSetNXThenExpire(t *testing.T) {
	t.Parallel()
	t.Run("mistake", func(t *testing.T) {
		t.Parallel()
		ns := testinfra.Redis(t)
		p := newProcess(t, ns.Addr)
		key := ns.Prefix + "lock"
		dying := lesson.NewSetNXThenExpire(p.Client, key, ttl)
		dying.Crash = func() error { return errCrash }
		if _, err := dying.TryLock(t.Context()); !errors.Is(err, errCrash) {
			t.Fatalf("TryLock: %v, want the injected crash", err)
		}
		if d := p.PTTL(t.Context(), key).Val(); d != -1 {
			t.Fatalf("PTTL %v, want -1 (no expiry): the fault was not reproduced", d)
		}
		if ok, _ := lesson.NewSetNXThenExpire(p.Client, key, ttl).TryLock(t.Context()); ok {
			t.Fatal("another client took a lock that should be stuck")
		}
		t.Log("reproduced: the key has no expiry, so the lock is held forever")
	})
	t.Run("lock.Redis", func(t *testing.T) {
		t.Parallel()
		ns := testinfra.Redis(t)
		dying, other := newProcess(t, ns.Addr), newProcess(t, ns.Addr)
		if ok, err := dying.fixedLock(ns.Prefix).TryLock(t.Context()); !ok {
			t.Fatalf("TryLock: %v", err)
		}
		dying.proxy.Cut()
		mustLock(t, other.fixedLock(ns.Prefix)) // after the TTL
	})
}

// testWrongRelease runs the scenario of seeds 002 and 004 against a
// mistake and against lock.Redis: A's lease runs out while A is paused, B
// takes the lock, A wakes and releases, and C tries the lock while B still
// works. The mistake lets C in; lock.Redis refuses A's release.
func testWrongRelease(t *testing.T, newMistake func(c *redis.Client, key string) lesson.Lock) {
	t.Run("mistake", func(t *testing.T) {
		t.Parallel()
		ns := testinfra.Redis(t)
		p := newProcess(t, ns.Addr)
		lockOf := func() lesson.Lock { return newMistake(p.Client, ns.Prefix+"lock") }
		// No watchdog to stop: A's lease runs out by itself.
		if !wrongRelease(t, lockOf(), lockOf(), lockOf(), func() {}, func() {}) {
			t.Fatal("C was kept out: the fault was not reproduced")
		}
		t.Log("reproduced: A's release deleted B's lock, and C got in while B still held it")
	})
	t.Run("lock.Redis", func(t *testing.T) {
		t.Parallel()
		ns := testinfra.Redis(t)
		a, b, c := newProcess(t, ns.Addr), newProcess(t, ns.Addr), newProcess(t, ns.Addr)
		if wrongRelease(t, a.fixedLock(ns.Prefix), b.fixedLock(ns.Prefix), c.fixedLock(ns.Prefix), a.proxy.Pause, a.proxy.Resume) {
			t.Fatal("C got in while B held the lock")
		}
	})
}

func wrongRelease(t *testing.T, a, b, c lesson.Lock, pauseA, resumeA func()) (cGotIn bool) {
	t.Helper()
	mustLock(t, a)
	pauseA()
	mustLock(t, b) // A's lease has run out
	resumeA()
	a.Unlock(t.Context()) // refused by a correct lock, which the scenario does not need to know
	ok, err := c.TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestUncheckedDelete: a release without an owner check deletes the lock
// of the holder that came next, and lets a third one in. lock.Redis's
// compare-and-delete refuses the stale release.
func TestUncheckedDelete(t *testing.T) {
	t.Parallel()
	testWrongRelease(t, func(c *redis.Client, key string) lesson.Lock { return lesson.NewUncheckedDelete(c, key, ttl) })
}

// TestClockLock: seed 000's lock of expiry timestamps. Its release deletes
// whoever holds the lock (the scenario above), and a client whose clock
// runs ahead takes over a live lock. lock.Redis uses no client's clock.
func TestClockLock(t *testing.T) {
	t.Parallel()
	t.Run("wrong release", func(t *testing.T) {
		t.Parallel()
		testWrongRelease(t, func(c *redis.Client, key string) lesson.Lock { return lesson.NewClockLock(c, key, ttl) })
	})
	t.Run("clock ahead/mistake", func(t *testing.T) {
		t.Parallel()
		ns := testinfra.Redis(t)
		p := newProcess(t, ns.Addr)
		a := lesson.NewClockLock(p.Client, ns.Prefix+"lock", ttl)
		b := lesson.NewClockLock(p.Client, ns.Prefix+"lock", ttl)
		b.Now = func() time.Time { return time.Now().Add(3 * ttl) } // NTP has not caught up
		mustLock(t, a)
		if ok, err := b.TryLock(t.Context()); err != nil || !ok {
			t.Fatalf("B: %v, %v: the fault was not reproduced", ok, err)
		}
		t.Log("reproduced: B's clock runs ahead, so it took over A's live lock")
	})
	t.Run("clock ahead/lock.Redis", func(t *testing.T) {
		t.Parallel()
		// lock.Redis reads no client clock, so there is none to set
		// ahead: the same step finds the lock held.
		ns := testinfra.Redis(t)
		a, b := newProcess(t, ns.Addr), newProcess(t, ns.Addr)
		mustLock(t, a.fixedLock(ns.Prefix))
		if ok, err := b.fixedLock(ns.Prefix).TryLock(t.Context()); err != nil || ok {
			t.Fatalf("B: %v, %v: it took a live lock", ok, err)
		}
	})
}

// staleWrite is the scenario of a lease with no watchdog and no fencing,
// on a stock of 1: A takes the lock and reads the stock, then is paused
// past its TTL. B takes the lock and sells the unit. A wakes and sells the
// unit it read. sell writes one sale for a holder that read available, and
// the audit, read from the database, says what came of it.
func staleWrite(t *testing.T, a, b lesson.Lock, pauseA, resumeA func(), sell saleFunc) (audit.Audit, error) {
	t.Helper()
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	if err := stock.Reset(t.Context(), gdb, sku, 1); err != nil {
		t.Fatal(err)
	}
	read := func() int {
		it, err := stock.Get(t.Context(), gdb, sku)
		if err != nil {
			t.Fatal(err)
		}
		return it.Available
	}

	mustLock(t, a)
	seenByA := read()
	pauseA()
	mustLock(t, b) // A's lease has run out
	if err := sell(gdb, b, read()); err != nil {
		t.Fatalf("B's sale: %v", err)
	}
	b.Unlock(t.Context())
	resumeA()
	errA := sell(gdb, a, seenByA)
	found, err := audit.SKU(t.Context(), gdb, sku, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return found, errA
}

const sku = "last-unit"

// saleFunc sells one unit on gdb for the holder of l, who read available.
type saleFunc func(gdb *gorm.DB, l lesson.Lock, available int) error

// order inserts the order of one sale.
func order(who string) stock.Fn {
	return func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO orders (sku, user_id, quantity, status, created_at) VALUES (?, ?, 1, 'created', ?)`,
			sku, who, time.Now().UTC()).Error
	}
}

// TestBareLease: with no watchdog and no fencing, the paused holder's
// write lands over its successor's, and one unit is sold twice. With
// lock.Redis and stock.Fenced, the paused holder's write is refused.
func TestBareLease(t *testing.T) {
	t.Parallel()
	t.Run("mistake", func(t *testing.T) {
		t.Parallel()
		ns := testinfra.Redis(t)
		p := newProcess(t, ns.Addr)
		a := lesson.NewBareLease(p.Client, ns.Prefix+"lock", ttl)
		b := lesson.NewBareLease(p.Client, ns.Prefix+"lock", ttl)
		who := map[lesson.Lock]string{a: "A", b: "B"}
		au, errA := staleWrite(t, a, b, func() {}, func() {}, func(gdb *gorm.DB, l lesson.Lock, available int) error {
			if available < 1 {
				return stock.ErrSoldOut
			}
			return lesson.WriteUnfenced(t.Context(), gdb, sku, available-1, order(who[l]))
		})
		if errA != nil || au.Oversold == 0 {
			t.Fatalf("A's sale: %v; audit %+v: the fault was not reproduced", errA, au)
		}
		t.Logf("reproduced: %d orders for %d unit: %v", au.Orders, au.Initial, au.Violations())
	})
	t.Run("lock.Redis", func(t *testing.T) {
		t.Parallel()
		ns := testinfra.Redis(t)
		pa, pb := newProcess(t, ns.Addr), newProcess(t, ns.Addr)
		a, b := pa.fixedLock(ns.Prefix), pb.fixedLock(ns.Prefix)
		who := map[lesson.Lock]string{a: "A", b: "B"}
		au, errA := staleWrite(t, a, b, pa.proxy.Pause, pa.proxy.Resume, func(gdb *gorm.DB, l lesson.Lock, _ int) error {
			// Fenced reads the stock itself, under the lease's token.
			return stock.Fenced(t.Context(), gdb, sku, -1, l.(*fixed).lease.Token(), order(who[l]))
		})
		if !errors.Is(errA, stock.ErrFenced) {
			t.Errorf("A's sale: %v, want ErrFenced", errA)
		}
		if v := au.Violations(); len(v) > 0 || au.Orders != 1 {
			t.Errorf("%d orders for 1 unit: %v", au.Orders, v)
		}
	})
}
