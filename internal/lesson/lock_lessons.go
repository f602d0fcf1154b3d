package lesson

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/stock"
)

// The lessons on Redis locks. Their TTL is short, so that they run fast
// on a real server, where time has to pass for a key to expire.
const lessonTTL = 300 * time.Millisecond

var errCrash = errors.New("lesson: the process died here")

func init() {
	register(Lesson{Number: 3, Name: "setnx-expire", Seed: "seed 002",
		Claim:    "SETNX, then EXPIRE: the lock gets its TTL one command later (wrongGetLock)",
		Setup:    "a client takes the lock and dies right after the first command; another tries it after twice the TTL",
		Takeaway: "take the lock and its expiry in one command, SET key token NX PX ttl, or one script",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			key := env.Prefix + "setnx-expire:mistake"
			dying := NewSetNXThenExpire(env.Redis, key, lessonTTL)
			dying.Crash = func() error { return errCrash }
			if _, err := dying.TryLock(ctx); !errors.Is(err, errCrash) {
				return Trial{}, fmt.Errorf("the crash was not injected: %v", err)
			}
			return afterCrash(ctx, env, key, "SETNX, then EXPIRE", NewSetNXThenExpire(env.Redis, key, lessonTTL))
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			key := env.Prefix + "setnx-expire:fix"
			if ok, err := newOwned(env.Redis, key, lessonTTL).TryLock(ctx); !ok {
				return Trial{}, fmt.Errorf("the first client did not take the lock: %v", err)
			} // and dies: nobody releases it
			return afterCrash(ctx, env, key, "SET NX PX", NewBareLease(env.Redis, key, lessonTTL))
		},
	})
	register(Lesson{Number: 4, Name: "unchecked-delete", Seed: "seed 004",
		Claim:    "a holder whose lock timed out during a GC pause deletes the key, and so the next holder's lock",
		Setup:    "A takes the lock and is paused past its TTL; B takes it; A wakes and releases; C tries the lock while B still works",
		Takeaway: "release with a token and a compare-and-delete script, so that a holder can only ever delete its own lock",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			key := env.Prefix + "unchecked-delete:mistake"
			return staleRelease(ctx, env, key, "DEL with no owner check", func() Lock { return NewUncheckedDelete(env.Redis, key, lessonTTL) })
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			key := env.Prefix + "unchecked-delete:fix"
			return staleRelease(ctx, env, key, "a random token, released by compare-and-delete", func() Lock { return NewBareLease(env.Redis, key, lessonTTL) })
		},
	})
	register(Lesson{Number: 5, Name: "getset-clock", Seed: "seed 000",
		Claim:    "SETNX an expiry timestamp; a client that finds it in the past takes the lock with GETSET",
		Setup:    "A takes the lock; B, whose clock runs 3 TTLs ahead, tries it while A works; then A releases",
		Takeaway: "never trust a client's clock for expiry: let Redis expire the key (PX), and release by token",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			key := env.Prefix + "getset-clock:mistake"
			a, b := NewClockLock(env.Redis, key, lessonTTL), NewClockLock(env.Redis, key, lessonTTL)
			b.Now = func() time.Time { return time.Now().Add(3 * lessonTTL) }
			return fastClock(ctx, env, key, "SETNX and GETSET on client timestamps", a, b)
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			key := env.Prefix + "getset-clock:fix"
			// No clock to set ahead: the expiry is Redis's.
			return fastClock(ctx, env, key, "SET NX PX, compare-and-delete", NewBareLease(env.Redis, key, lessonTTL), NewBareLease(env.Redis, key, lessonTTL))
		},
	})
}

// The lesson of a lease that expires while its holder is paused.
func init() {
	register(Lesson{Number: 6, Name: "paused-lease", Seed: "seed 004",
		Claim:    "a lock with a TTL and a watchdog keeps a holder safe while it works",
		Setup:    "1 unit; A takes the lock and reads the stock, then is paused (its connection frozen, as by a GC pause or SIGSTOP) past the TTL; B takes the lock and sells the unit; A wakes and sells what it read",
		Takeaway: "a paused process cannot renew: give each lease a fencing token and let the database refuse a write older than the last",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			sku, err := onSale(ctx, env, "paused-lease-mistake", 1)
			if err != nil {
				return Trial{}, err
			}
			key := env.Prefix + "paused-lease:mistake"
			a, b := NewBareLease(env.Redis, key, lessonTTL), NewBareLease(env.Redis, key, lessonTTL)
			sellUnfenced := func(l Lock, who string, read int) error {
				if read < 1 {
					return stock.ErrSoldOut
				}
				return WriteUnfenced(ctx, env.DB, sku, read-1, who)
			}
			if err := mustLock(ctx, a); err != nil {
				return Trial{}, err
			}
			readA, err := available(ctx, env, sku)
			if err != nil {
				return Trial{}, err
			}
			env.Advance(2 * lessonTTL) // A is paused; nothing renews its lease
			if err := mustLock(ctx, b); err != nil {
				return Trial{}, err
			}
			readB, err := available(ctx, env, sku)
			if err == nil {
				err = sellUnfenced(b, "B", readB)
			}
			if err != nil {
				return Trial{}, err
			}
			b.Unlock(ctx)
			errA := sellUnfenced(a, "A", readA) // A wakes up and writes what it read
			a.Unlock(ctx)
			return pausedTrial(ctx, env, sku, "a lease with no watchdog and no fencing token", errA)
		},
		Fix: pausedFenced,
	})
}

// afterCrash reports what a second client finds after the first died
// holding key: the key's expiry, and whether the lock can be taken once
// twice the TTL has passed.
func afterCrash(ctx context.Context, env *Env, key, name string, next Lock) (Trial, error) {
	defer env.Redis.Del(context.WithoutCancel(ctx), key) // a key with no expiry stays forever
	pttl, err := env.Redis.PTTL(ctx, key).Result()
	if err != nil {
		return Trial{}, err
	}
	env.Advance(2 * lessonTTL)
	taken, err := next.TryLock(ctx)
	if err != nil {
		return Trial{}, err
	}
	ms := int64(pttl / time.Millisecond)
	if pttl < 0 {
		ms = int64(pttl) // -1: no expiry
	}
	return Trial{Name: name, Numbers: map[string]int64{"pttl_ms_after_crash": ms, "taken_after_2_ttl": b2i(taken)},
		Happened: fmt.Sprintf("the key's PTTL after the crash is %d ms (-1: never expires); after twice the TTL another client took the lock: %v", ms, taken),
		Failed:   !taken}, nil
}

// staleRelease runs seeds 002 and 004's wrong release and reports whether
// C got the lock while B held it.
func staleRelease(ctx context.Context, env *Env, key, name string, newLock func() Lock) (Trial, error) {
	defer env.Redis.Del(context.WithoutCancel(ctx), key)
	a, b, c := newLock(), newLock(), newLock()
	if err := mustLock(ctx, a); err != nil {
		return Trial{}, err
	}
	env.Advance(2 * lessonTTL) // A is paused past its TTL
	if err := mustLock(ctx, b); err != nil {
		return Trial{}, err
	}
	if err := a.Unlock(ctx); err != nil {
		return Trial{}, err
	}
	left, err := env.Redis.Exists(ctx, key).Result()
	if err != nil {
		return Trial{}, err
	}
	in, err := c.TryLock(ctx)
	if err != nil {
		return Trial{}, err
	}
	return Trial{Name: name, Numbers: map[string]int64{"key_after_a_release": left, "c_got_in_while_b_held": b2i(in)},
		Happened: fmt.Sprintf("after A's late release the lock's key exists: %d; C then took the lock while B held it: %v", left, in),
		Failed:   in}, nil
}

// fastClock: A holds the lock, B tries it, A releases; it reports whether
// B took a live lock, and whether the key survived A's release of B's
// lock.
func fastClock(ctx context.Context, env *Env, key, name string, a, b Lock) (Trial, error) {
	defer env.Redis.Del(context.WithoutCancel(ctx), key)
	if err := mustLock(ctx, a); err != nil {
		return Trial{}, err
	}
	stole, err := b.TryLock(ctx)
	if err != nil {
		return Trial{}, err
	}
	if err := a.Unlock(ctx); err != nil {
		return Trial{}, err
	}
	left, err := env.Redis.Exists(ctx, key).Result()
	if err != nil {
		return Trial{}, err
	}
	// B holds the lock if it took it, and A's release must leave it.
	deleted := stole && left == 0
	return Trial{Name: name, Numbers: map[string]int64{"b_took_a_live_lock": b2i(stole), "b_lock_deleted_by_a": b2i(deleted)},
		Happened: fmt.Sprintf("B took A's live lock: %v; A's release then deleted B's lock: %v", stole, deleted),
		Failed:   stole || deleted}, nil
}

// pausedFenced is paused-lease's fix: lock.Redis, whose leases carry
// fencing tokens, and stock.Fenced, which refuses a token older than the
// last. A's connection is frozen for its pause, so its watchdog cannot
// renew, as in a paused process.
func pausedFenced(ctx context.Context, env *Env) (Trial, error) {
	sku, err := onSale(ctx, env, "paused-lease-fix", 1)
	if err != nil {
		return Trial{}, err
	}
	opts := &lock.RedisOptions{TTL: lessonTTL, Prefix: env.Prefix + "paused-lease:fix:"}
	frozen := &freezer{}
	aClient := redis.NewClient(frozen.options(env.Redis.Options()))
	defer aClient.Close()
	a, err := lock.NewRedis(aClient, opts).Acquire(ctx, sku)
	if err != nil {
		return Trial{}, err
	}
	defer a.Release(context.WithoutCancel(ctx))
	frozen.freeze()
	env.Advance(2 * lessonTTL)
	b, err := lock.NewRedis(env.Redis, opts).Acquire(ctx, sku)
	if err != nil {
		frozen.thaw()
		return Trial{}, err
	}
	errB := stock.Fenced(ctx, env.DB, sku, -1, b.Token(), ordered(sku, "B"))
	b.Release(ctx)
	frozen.thaw()
	if errB != nil {
		return Trial{}, errB
	}
	errA := stock.Fenced(ctx, env.DB, sku, -1, a.Token(), ordered(sku, "A"))
	if errA != nil && !errors.Is(errA, stock.ErrFenced) {
		return Trial{}, errA
	}
	return pausedTrial(ctx, env, sku, "lock.Redis with a fencing token, and stock.Fenced", errA)
}

func pausedTrial(ctx context.Context, env *Env, sku, name string, errA error) (Trial, error) {
	a, err := audit.SKU(ctx, env.DB, sku, 0, nil)
	if err != nil {
		return Trial{}, err
	}
	t := auditTrial(name, a)
	t.Numbers["a_refused"] = b2i(errors.Is(errA, stock.ErrFenced))
	t.Happened += fmt.Sprintf("; A's stale write refused: %v", errors.Is(errA, stock.ErrFenced))
	return t, nil
}

// mustLock takes l, retrying briefly.
func mustLock(ctx context.Context, l Lock) error {
	for range 200 {
		ok, err := l.TryLock(ctx)
		if err != nil || ok {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("lesson: the lock was never free")
}

func available(ctx context.Context, env *Env, sku string) (int, error) {
	it, err := stock.Get(ctx, env.DB, sku)
	return it.Available, err
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// freezer freezes a client's connections, as a paused process's are:
// reads and writes wait until it thaws.
type freezer struct {
	mu     sync.Mutex
	thawed chan struct{} // nil while not frozen
}

func (f *freezer) options(o *redis.Options) *redis.Options {
	c := *o
	c.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return frozenConn{conn, f}, err
	}
	return &c
}

func (f *freezer) freeze() { f.mu.Lock(); f.thawed = make(chan struct{}); f.mu.Unlock() }

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.thawed != nil {
		close(f.thawed)
		f.thawed = nil
	}
}

func (f *freezer) wait() {
	f.mu.Lock()
	c := f.thawed
	f.mu.Unlock()
	if c != nil {
		<-c
	}
}

type frozenConn struct {
	net.Conn
	f *freezer
}

func (c frozenConn) Read(b []byte) (int, error)  { c.f.wait(); return c.Conn.Read(b) }
func (c frozenConn) Write(b []byte) (int, error) { c.f.wait(); return c.Conn.Write(b) }
