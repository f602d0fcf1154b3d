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
	"sync"
	"sync/atomic"
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
	// while it waits leaves nothing behind.
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
	// keep, when not nil, runs while the lease is held. It returns why the
	// lock was lost, or nil once ctx ends (the lease was released).
	keep func(ctx context.Context) error
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

// leaseKey identifies a lock within the process: the backend that took it
// and its name. It is also the ctx key under which WithLease stores a lease.
type leaseKey struct {
	backend backend
	name    string
}

// Lease is one holder's hold on a lock. Its methods may be called from any
// goroutine.
type Lease struct {
	key     leaseKey
	g       grant
	fences  bool
	backend string          // for the metrics
	granted time.Time       // for the metrics
	ctx     context.Context // ends when the lease is lost or released
	cancel  context.CancelCauseFunc
	kept    chan struct{} // closed when g.keep has returned

	token atomic.Int64 // g.token, or what Raise made it

	mu    sync.Mutex
	holds int // Acquire calls not yet released: more than one when re-entered
}

func newLease(key leaseKey, g grant, lk locker) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{key: key, g: g, fences: lk.fences, backend: lk.name, granted: time.Now(),
		ctx: ctx, cancel: cancel, kept: make(chan struct{}), holds: 1}
	l.token.Store(g.token)
	if g.keep == nil {
		close(l.kept)
		return l
	}
	go func() {
		defer close(l.kept)
		if err := g.keep(ctx); err != nil {
			metrics.LeasesLost.WithLabelValues(lk.name).Inc()
			cancel(fmt.Errorf("%w: %s: %w", ErrLost, key.name, err))
		}
	}()
	return l
}

// Name returns the name of the lock.
func (l *Lease) Name() string { return l.key.name }

// Token returns the fencing token: larger than the token of every earlier
// acquisition of the same lock from the same store.
func (l *Lease) Token() int64 { return l.token.Load() }

// raiseMargin is how far Raise goes past the floor it is given: room for
// tokens that the store handed out before it lost its count and that have
// not reached the fenced store yet. Each holder writes as soon as it has
// its token, so there are few of them.
const raiseMargin = 1 << 16

// Raise gives the lease a new token, floor + 65,536, for a store that has
// lost its count of the lock's acquisitions (restarted without its data, or
// failed over to a replica that lagged), so that the fenced store, which
// has seen floor, accepts this holder again. The store's count is raised in
// the same step, and only while the lease still holds the lock there: a
// stale holder gets ErrNotHeld. The local and dbtable locks return
// errors.ErrUnsupported. See docs/locks.md#a-counter-that-starts-over.
func (l *Lease) Raise(ctx context.Context, floor int64) error {
	if l.g.raise == nil {
		return fmt.Errorf("lock: raise %s: %w", l.key.name, errors.ErrUnsupported)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("lock: raise %s: %w", l.key.name, err)
	}
	token := floor + raiseMargin
	if err := l.g.raise(ctx, token); err != nil {
		return fmt.Errorf("lock: raise %s: %w", l.key.name, err)
	}
	l.token.Store(token)
	metrics.TokenRaises.WithLabelValues(l.backend).Inc()
	return nil
}

// Fences reports whether Token orders every holder of the lock, in every
// process, so that a store may refuse the writes of a stale holder by it.
// The lock decides this where it is built: a Local lock's tokens order the
// holders of one process only, and would fence another process's at random.
func (l *Lease) Fences() bool { return l.fences }

// Lost returns a channel that is closed once the lease no longer holds the
// lock: it was lost (see Err) or released. A lost lease must still be
// released: that frees the lock's queue in this process, and the lock in
// the store if it turns out to be still this lease's.
func (l *Lease) Lost() <-chan struct{} { return l.ctx.Done() }

// Err returns nil while the lease holds the lock. Once Lost is closed it
// returns why: an error wrapping ErrLost, or ErrNotHeld after the release.
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

func (l *Lease) reenter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == 0 {
		return fmt.Errorf("lock: re-enter %s: %w", l.key.name, errReleased)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("lock: re-enter: %w", err)
	}
	l.holds++
	return nil
}

// Release gives up one acquisition of the lease; the last one releases the
// lock, in the store only if this lease still owns it there. Releasing a
// lease that expired, or releasing once more than acquired, returns an
// error wrapping ErrNotHeld and leaves the lock to its current holder.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.holds == 0 {
		l.mu.Unlock()
		return fmt.Errorf("lock: release %s: %w", l.key.name, errReleased)
	}
	l.holds--
	last := l.holds == 0
	l.mu.Unlock()
	if !last {
		return nil
	}
	l.cancel(errReleased) // keeps the cause of a loss that came first
	<-l.kept              // no renewal may follow the release
	metrics.LockHold.WithLabelValues(l.backend).Observe(time.Since(l.granted).Seconds())
	if err := l.g.release(ctx); err != nil {
		return fmt.Errorf("lock: release %s: %w", l.key.name, err)
	}
	return nil
}

// WithLease returns a copy of parent that carries the lease and is
// cancelled, with the lease's Err as its cause, once the lease is lost or
// released. Work done under the lock should use it, so that it stops when
// the lock is gone. Acquire and TryAcquire of the same lock from the same
// Locker with this ctx, or one derived from it, re-enter the lease.
func WithLease(parent context.Context, l *Lease) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, l.key, l))
	stop := context.AfterFunc(l.ctx, func() { cancel(l.Err()) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
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
