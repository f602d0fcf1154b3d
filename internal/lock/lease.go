package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/shop/internal/metrics"
)

// leaseKey identifies a lock within the process: the backend that took it
// and its name. It is also the ctx key under which WithLease stores a lease.
type leaseKey struct {
	backend backend
	name    string
}

// Lease is one holder's hold on a lock. Its methods may be called from any
// goroutine.
type Lease struct {
	key         leaseKey
	g           grant
	fences      bool
	backend     string          // for the metrics
	granted     time.Time       // for the metrics
	ctx         context.Context // ends when the lease is lost or released
	cancel      context.CancelCauseFunc
	renewalDone chan struct{} // closed when g.renew has returned

	token atomic.Int64 // g.token, or what Raise made it

	mu    sync.Mutex
	holds int // Acquire calls not yet released: more than one when re-entered
}

func newLease(key leaseKey, g grant, lk locker) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{key: key, g: g, fences: lk.fences, backend: lk.name, granted: time.Now(),
		ctx: ctx, cancel: cancel, renewalDone: make(chan struct{}), holds: 1}
	l.token.Store(g.token)
	if g.renew == nil {
		close(l.renewalDone)
		return l
	}
	go func() {
		defer close(l.renewalDone)
		if err := g.renew(ctx); err != nil {
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
	<-l.renewalDone       // no renewal may follow the release
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
