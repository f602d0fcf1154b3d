// Package lock takes named locks that hand out fencing tokens.
//
// Every backend implements Locker, one file each:
//
//	local.go      a mutex per name in this process: right in one process, wrong across several
//	redis.go      one Redis master, through bsm/redislock
//	redlock.go    a quorum of independent Redis masters (Redlock)
//	zookeeper.go  an ephemeral sequential znode per contender
//	etcd.go       a key per contender on a lease, as etcd's concurrency.Mutex keeps them
//	dbtable.go    a row per lock in a MySQL table
//
// A held lock is a Lease. Its token strictly increases with every
// acquisition of the same name, issued in the same atomic step that grants
// the lock, so a store that refuses tokens below the highest it has seen
// (fencing) refuses a holder that lost the lock without knowing it. Lost
// tells the holder as soon as it can know. Leases that expire (redis,
// redlock, dbtable) are renewed by a watchdog at a third of their TTL; a
// renewal that finds the lock gone, or none succeeding before the lease
// runs out, loses the lease.
//
// Contenders within one process queue in the process, and only the first
// asks the store; so TryAcquire also fails while another goroutine of the
// process awaits the lock. A holder re-enters with the ctx of WithLease:
// Go has no thread identity, so the ctx carries the holder's, and must stay
// with the holder's own flow of control.
//
// The classic mistakes with distributed locks are kept, failing, in
// internal/lesson. See docs/locks.md.
package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/shop/internal/backoff"
	"github.com/stockguard/shop/internal/metrics"
)

// Errors of the locks. Test them with errors.Is: they come wrapped.
var (
	// ErrLocked means TryAcquire found the lock held by another holder.
	ErrLocked = errors.New("lock: held by another holder")
	// ErrNotHeld means a release found that the lease no longer holds the
	// lock: it expired and may belong to another holder by now.
	ErrNotHeld = errors.New("lock: not held")
	// ErrLost means the lease ended before it was released: it expired,
	// its renewal failed, or its session ended.
	ErrLost = errors.New("lock: lost")
)

// errReleased is why a released lease's Lost is closed.
var errReleased = fmt.Errorf("%w: released", ErrNotHeld)

// Locker takes named locks. Every backend implements it.
type Locker interface {
	// Acquire waits until it holds the lock or ctx ends. A ctx that ends
	// while it waits leaves nothing behind, but for an attempt still on its
	// way to the store: that one may take the lock after all, on a lease
	// that nobody renews, which runs out.
	Acquire(ctx context.Context, name string) (*Lease, error)
	// TryAcquire makes one attempt, and fails at once with ErrLocked if
	// another holder has the lock.
	TryAcquire(ctx context.Context, name string) (*Lease, error)
}

// grant is a backend's hold on one lock.
type grant struct {
	token int64
	// release gives the lock up if this hold still owns it, or returns
	// ErrNotHeld.
	release func(ctx context.Context) error
	// renew, when not nil, runs while the lease is held. It returns why the
	// lock was lost, or nil once ctx ends (the lease was released).
	renew func(ctx context.Context) error
	// raise, when not nil, raises the store's count of the lock's
	// acquisitions to token, while this hold still owns the lock, or
	// returns ErrNotHeld: see Lease.Raise.
	raise func(ctx context.Context, token int64) error
}

// backend is what a lock store provides; locker adds the rest.
type backend interface {
	// grant takes the lock. With wait it waits until it has the lock or
	// ctx ends; without, it fails with ErrLocked if the lock is held.
	grant(ctx context.Context, name string, wait bool) (grant, error)
}

// locker gives a backend its Acquire and TryAcquire.
type locker struct {
	name string // the backend's, for the metrics
	b    backend
	// gate, if not nil, queues this process's contenders for a name, so
	// that one at a time asks the store.
	gate *Local
	// fences says that the backend's tokens order every holder of a name,
	// in every process: true for a store that other processes share.
	fences bool
}

// remote is the locker of a backend in another process: contenders queue
// in this process first, as behind Redisson's per-lock semaphore. A hot
// lock then costs the store one contender per process, not one per
// request, and the holder's renewals and release do not wait for
// connections behind its own process's pollers.
func remote(name string, b backend) locker {
	return newLocker(name, b, NewLocal(), true)
}

// newLocker returns the locker of backend b, named name in the metrics,
// whose counters it starts at zero.
func newLocker(name string, b backend, gate *Local, fences bool) locker {
	metrics.LeasesLost.WithLabelValues(name)
	metrics.TokenRaises.WithLabelValues(name)
	return locker{name: name, b: b, gate: gate, fences: fences}
}

// Acquire implements Locker.
func (l locker) Acquire(ctx context.Context, name string) (*Lease, error) {
	return l.acquire(ctx, name, true)
}

// TryAcquire implements Locker.
func (l locker) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	return l.acquire(ctx, name, false)
}

func (l locker) acquire(ctx context.Context, name string, wait bool) (*Lease, error) {
	key := leaseKey{l.b, name}
	if held, ok := ctx.Value(key).(*Lease); ok {
		if err := held.reenter(); err != nil {
			return nil, err
		}
		return held, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("lock: acquire %s: %w", name, context.Cause(ctx))
	}
	asked := time.Now()
	g, err := l.grant(ctx, name, wait)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = errors.Join(err, context.Cause(ctx))
		}
		return nil, fmt.Errorf("lock: acquire %s: %w", name, err)
	}
	metrics.LockAcquire.WithLabelValues(l.name).Observe(time.Since(asked).Seconds())
	return newLease(key, g, l), nil
}

// grant passes through the gate, then takes the lock in the store; the
// lease's release gives up both.
func (l locker) grant(ctx context.Context, name string, wait bool) (grant, error) {
	if l.gate == nil {
		return l.b.grant(ctx, name, wait)
	}
	queued, err := l.gate.grant(ctx, name, wait)
	if err != nil {
		return grant{}, err
	}
	g, err := l.b.grant(ctx, name, wait)
	if err != nil {
		queued.release(ctx)
		return grant{}, err
	}
	release := g.release
	g.release = func(ctx context.Context) error {
		defer queued.release(ctx)
		return release(ctx)
	}
	return g, nil
}

// redisPoll bounds the backoff of a Redis lock's waiters. A poll there is
// one step in Redis's memory, cheap enough to make every few milliseconds,
// and a released lock then stands free for at most this long. A dbtable
// poll is a transaction on the shop's database, and backs off as far as a
// retried transaction does (backoff.Limit).
const redisPoll = 8 * time.Millisecond

// poll takes a lock through try, which makes one attempt and returns
// ErrLocked while another holder has the lock. With wait it tries again
// after a jittered exponential backoff, up to limit, until it succeeds or
// ctx ends.
func poll(ctx context.Context, wait bool, limit time.Duration, try func(context.Context) (grant, error)) (grant, error) {
	for attempt := 0; ; attempt++ {
		g, err := try(ctx)
		if !wait || !errors.Is(err, ErrLocked) {
			return g, err
		}
		if err := backoff.WaitUpTo(ctx, attempt, limit); err != nil {
			return grant{}, err
		}
	}
}

// drift is the margin a lease keeps below its TTL for clocks that run at
// slightly different rates, and for the store's expiry precision: 1% plus
// 2ms, as the Redlock description suggests.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// renewal is the watchdog of a lease that lasts ttl: granted is when the
// attempt that took the lock started. It calls refresh every ttl/3 and
// returns, losing the lease, when refresh returns ErrNotHeld or when no
// refresh has succeeded before the lease ran out. A failed refresh is tried
// again soon. It returns nil when ctx ends.
func renewal(ttl time.Duration, granted time.Time, refresh func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		valid := granted.Add(ttl - drift(ttl))
		expiry := time.NewTimer(time.Until(valid))
		defer expiry.Stop()
		next := time.NewTimer(ttl / 3)
		defer next.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-expiry.C:
				return errors.New("the lease ran out before a renewal succeeded")
			case <-next.C:
			}
			start := time.Now()
			// refresh runs aside, so that the expiry is noticed on time even
			// if the client does not honour the deadline.
			done := make(chan error, 1)
			rctx, cancel := context.WithDeadline(ctx, valid)
			go func() { done <- refresh(rctx) }()
			select {
			case <-ctx.Done():
				cancel()
				return nil
			case <-expiry.C:
				cancel()
				return errors.New("the lease ran out while a renewal was pending")
			case err := <-done:
				cancel()
				switch {
				case err == nil:
					valid = start.Add(ttl - drift(ttl))
					expiry.Reset(time.Until(valid))
					next.Reset(ttl / 3)
				case errors.Is(err, ErrNotHeld):
					return fmt.Errorf("renewal: %w", err)
				default:
					next.Reset(ttl / 10)
				}
			}
		}
	}
}
