package stock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/testinfra"
)

// onRedisLock puts sku on sale with quantity units, on a database of the
// test's own, and returns the Redis lock options, under the test's own
// prefix, and its client.
//
// The tests here build Locked and Queued by hand, not through the
// registry (which imports this package): they count the lock's
// acquisitions and reach into the hand-over of a run.
func onRedisLock(t *testing.T, sku string, quantity int) (*gorm.DB, *redis.Client, *lock.RedisOptions) {
	t.Helper()
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	ns := testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: ns.Addr})
	t.Cleanup(func() { rdb.Close() })
	if err := Reset(t.Context(), gdb, sku, quantity); err != nil {
		t.Fatal(err)
	}
	return gdb, rdb, &lock.RedisOptions{Prefix: ns.Prefix}
}

// acquisitions counts a locker's acquisitions.
type acquisitions struct {
	Locker
	n atomic.Int32
}

func (a *acquisitions) Acquire(ctx context.Context, name string) (*lock.Lease, error) {
	a.n.Add(1)
	return a.Locker.Acquire(ctx, name)
}

// TestLockedRun: behind Queued, a lease that sold is passed to the next
// buyer waiting in the process, for a run of at most maxRun buyers, and
// the lock is free in Redis once no buyer waits.
func TestLockedRun(t *testing.T) {
	t.Parallel()
	const sku, buyers = "run", 64
	gdb, rdb, opts := onRedisLock(t, sku, buyers)
	locker := &acquisitions{Locker: lock.NewRedis(rdb, opts)}
	q := QueueLocked(gdb, NewLocked(gdb, locker))
	var wg sync.WaitGroup
	for range buyers {
		wg.Go(func() {
			if err := q.Adjust(t.Context(), sku, -1, func(Tx) error { return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if it, err := Get(t.Context(), gdb, sku); err != nil || it.Available != 0 {
		t.Errorf("available %d (%v), want 0", it.Available, err)
	}
	// 64 buyers queued at once: runs of maxRun at most, so buyers/maxRun
	// acquisitions at least; fewer than one per buyer, or there were no
	// runs.
	if n := int(locker.n.Load()); n < buyers/maxRun || n >= buyers {
		t.Errorf("%d acquisitions for %d buyers; want from %d to %d", n, buyers, buyers/maxRun, buyers-1)
	}
	// Another process finds the lock free.
	lease, err := lock.NewRedis(rdb, opts).TryAcquire(t.Context(), LockName(sku))
	if err != nil {
		t.Fatalf("after the last buyer, the lock is still held: %v", err)
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Error(err)
	}
}

// TestLockedKeptLeaseDropped: a lease kept for a waiter that then left
// without its turn (its request ended) is released when the SKU's line
// empties. The waiter is entered by hand: in a real sale it leaves in the
// moment between the holder's look at the line and the hand-over, which a
// test cannot aim at.
func TestLockedKeptLeaseDropped(t *testing.T) {
	t.Parallel()
	const sku = "kept"
	gdb, rdb, opts := onRedisLock(t, sku, 5)
	locked := NewLocked(gdb, lock.NewRedis(rdb, opts))
	q := QueueLocked(gdb, locked)
	other := lock.NewRedis(rdb, opts) // another process's view of the lock

	l, _ := q.enter(sku) // the waiter
	if err := locked.adjustThen(t.Context(), []Line{{SKU: sku, Delta: -1}}, func(Tx) error { return nil }, func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryAcquire(t.Context(), LockName(sku)); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("while kept for the waiter: %v, want ErrLocked", err)
	}
	q.leave(sku, l) // the waiter leaves: the line is empty
	lease, err := other.TryAcquire(t.Context(), LockName(sku))
	if err != nil {
		t.Fatalf("once the line emptied, the lock is still held: %v", err)
	}
	if err := lease.Release(t.Context()); err != nil {
		t.Error(err)
	}
}
