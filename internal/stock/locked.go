package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/tracing"
)

// Locker is what the lock strategies need of a lock: any backend of
// internal/lock.
type Locker interface {
	Acquire(ctx context.Context, name string) (*lock.Lease, error)
}

// LockName is the name under which the lock strategies lock sku.
func LockName(sku string) string { return "stock:" + sku }

// Locked is every lock strategy (local, redis, redlock, zookeeper, etcd,
// dbtable): the same composition, whatever the lock. It acquires the lock
// on the SKU, reads, checks and writes the stock and runs fn in one
// transaction conditional on the lease's fencing token (Fenced), and
// releases the lock. Behind Queued, a lease that has just sold passes to
// the next buyer of the SKU waiting in the same process, up to maxRun
// buyers per acquisition: a run, which only a lease that fences starts.
// A give-back (every delta > 0) takes no lock (giveBack). See
// docs/locks.md, docs/locks.md#runs and docs/locks.md#give-backs.
type Locked struct {
	db     *gorm.DB
	locker Locker

	mu   sync.Mutex
	kept map[string]*run // leases kept for the next buyer of their SKU
}

// run is one acquisition serving buyers of one SKU in turn.
type run struct {
	lease  *lock.Lease
	served int
}

// maxRun is the most buyers one acquisition serves. It bounds how long a
// process keeps a SKU before it lets its lock go and asks for it again, as
// every process's waiters do. Past 16 the bench's closed loop gained
// nothing measurable, and below it less (docs/locks.md#runs).
const maxRun = 16

var _ relay = (*Locked)(nil)

// NewLocked returns the lock strategy on locker.
func NewLocked(gdb *gorm.DB, locker Locker) *Locked {
	return &Locked{db: gdb, locker: locker, kept: make(map[string]*run)}
}

// releaseTimeout bounds a release, which runs even when the request's ctx
// has ended.
const releaseTimeout = 5 * time.Second

// Adjust implements the strategy: one buyer, one acquisition.
func (s *Locked) Adjust(ctx context.Context, sku string, delta int, fn Fn) error {
	return s.adjustThen(ctx, []Line{{SKU: sku, Delta: delta}}, fn, nil)
}

// AdjustLines implements the strategy for a cart: it locks the SKUs in
// ascending order, writes every line in one transaction, each conditional
// on its own lease's fencing token on its own row, and releases the locks
// in reverse.
func (s *Locked) AdjustLines(ctx context.Context, lines []Line, fn Fn) error {
	return s.adjustThen(ctx, Sorted(lines), fn, nil)
}

// adjustThen implements relay: when waiting, given, says after a sale that
// another buyer of a SKU waits in this process, that SKU's lease is kept
// for it. lines are in ascending SKU order.
func (s *Locked) adjustThen(ctx context.Context, lines []Line, fn Fn, waiting func(sku string) bool) error {
	if givingBack(lines) {
		return giveBack(ctx, s.db, lines, fn)
	}
	runs := make([]*run, 0, len(lines))
	for _, l := range lines {
		r := s.take(l.SKU)
		if r == nil {
			lease, err := acquire(ctx, s.locker, LockName(l.SKU))
			if err != nil {
				s.end(ctx, lines, runs, nil)
				// Whether the wait ran out or the lock server is down, nothing
				// was taken: the buyer may try again.
				return fmt.Errorf("%w: acquire: %w", ErrBusy, err)
			}
			r = &run{lease: lease}
		}
		runs = append(runs, r)
	}
	// Stop, rather than commit, once a lease is known to be lost.
	held := ctx
	fl := make([]fencedLine, len(lines))
	for i, r := range runs {
		var cancel context.CancelFunc
		held, cancel = lock.WithLease(held, r.lease)
		defer cancel()
		fl[i] = fencedLine{Line: lines[i], token: r.token(), claim: r.served == 0}
	}
	err := fenced(held, s.db, fl, fn)
	var ahead *fenceAhead
	if errors.As(err, &ahead) {
		i := slices.IndexFunc(fl, func(l fencedLine) bool { return l.SKU == ahead.sku })
		if i >= 0 && runs[i].lease.Raise(held, ahead.fence) == nil {
			// The lock's store had lost its count (a Redis restarted
			// empty), and the lease now holds a token past the fence.
			fl[i].token = runs[i].token()
			for j := range fl {
				fl[j].claim = true
			}
			err = fenced(held, s.db, fl, fn)
		}
	}
	for _, r := range runs {
		r.served++
	}
	if err != nil {
		waiting = nil
	}
	s.end(ctx, lines, runs, waiting)
	return err
}

// end releases the runs' leases, in reverse, but keeps for the next buyer
// of its SKU each one that waiting says a buyer in this process waits for,
// while its run may go on.
func (s *Locked) end(ctx context.Context, lines []Line, runs []*run, waiting func(sku string) bool) {
	for i := len(runs) - 1; i >= 0; i-- {
		r, sku := runs[i], lines[i].SKU
		if waiting != nil && r.lease.Fences() && r.served < maxRun && r.lease.Err() == nil && waiting(sku) {
			s.mu.Lock()
			s.kept[sku] = r
			s.mu.Unlock()
			continue
		}
		release(ctx, r.lease)
	}
}

// token is the fencing token the run writes with: its lease's, or 0, which
// passes the fence while no fencing lock has claimed the SKU since its
// reset.
func (r *run) token() int64 {
	if r.lease.Fences() {
		return r.lease.Token()
	}
	return 0
}

// take returns the run kept for sku, if any still holds its lock.
func (s *Locked) take(sku string) *run {
	s.mu.Lock()
	r := s.kept[sku]
	delete(s.kept, sku)
	s.mu.Unlock()
	if r != nil && r.lease.Err() != nil {
		release(context.Background(), r.lease)
		return nil
	}
	return r
}

// drop implements relay: it releases the lease kept for sku, if any.
func (s *Locked) drop(sku string) {
	s.mu.Lock()
	r := s.kept[sku]
	delete(s.kept, sku)
	s.mu.Unlock()
	if r != nil {
		release(context.Background(), r.lease)
	}
}

// acquire takes the lock name, in a span that records its fencing token.
func acquire(ctx context.Context, locker Locker, name string) (lease *lock.Lease, err error) {
	ctx, span := traceLock(ctx, "lock acquire", name)
	defer func() {
		if lease != nil {
			span.SetAttributes(tracing.FencingToken(lease.Token()))
		}
		tracing.End(span, err)
	}()
	return locker.Acquire(ctx, name)
}

// release gives the lease up, even when ctx has ended. A failed release
// leaves the lock to expire; what was committed stands, fenced.
func release(ctx context.Context, lease *lock.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	rctx, span := traceLock(rctx, "lock release", lease.Name())
	span.SetAttributes(tracing.FencingToken(lease.Token()))
	tracing.End(span, lease.Release(rctx))
}

// traceLock starts a lock's span, if the request is traced.
func traceLock(ctx context.Context, op, name string) (context.Context, trace.Span) {
	if !tracing.Recording(ctx) {
		return ctx, tracing.NoSpan
	}
	return tracing.Tracer().Start(ctx, op, trace.WithAttributes(attribute.String("shop.lock.name", name)))
}

// Fenced applies delta to sku's stock and runs fn in one transaction, as
// the holder of a lock on the SKU whose fencing token is token. It returns
// ErrFenced, having changed nothing, once a holder with a newer token has
// claimed the SKU.
//
// Tokens are compared with <=, so that the holder of a token may write more
// than once (a re-entered lease); a stale holder's token is always lower,
// since each acquisition's token is higher than all before it.
func Fenced(ctx context.Context, gdb *gorm.DB, sku string, delta int, token int64, fn Fn) error {
	return fenced(ctx, gdb, []fencedLine{{Line: Line{SKU: sku, Delta: delta}, token: token, claim: true}}, fn)
}

// fencedLine is a line written as the holder of its SKU's lock whose
// fencing token is token. With claim, the SKU is claimed for token first:
// a holder whose token has claimed it already need not again.
type fencedLine struct {
	Line
	token int64
	claim bool
}

// fenced is Fenced for every line, in one transaction: each line's write
// is conditional on its own token on its own row, and on no give-back
// having come since the read (giveBack); if one has, the transaction runs
// again and reads it.
func fenced(ctx context.Context, gdb *gorm.DB, lines []fencedLine, fn Fn) (err error) {
	defer func() {
		if errors.Is(err, ErrFenced) {
			metrics.FenceRefusals.Inc()
		}
	}()
	for _, l := range lines {
		if l.claim {
			if err := claim(ctx, gdb, l.SKU, l.token); err != nil {
				return busyIfDone(ctx, err)
			}
		}
	}
	for {
		err = fencedOnce(ctx, gdb, lines, fn)
		if !errors.Is(err, errGivenBack) {
			return err
		}
	}
}

// errGivenBack means a give-back changed the row between a holder's read
// and its write, which was therefore refused.
var errGivenBack = errors.New("stock: given back meanwhile")

// fencedOnce is one attempt of fenced's transaction.
func fencedOnce(ctx context.Context, gdb *gorm.DB, lines []fencedLine, fn Fn) error {
	return Transact(ctx, gdb, func(tx *gorm.DB) error {
		var sh short
		for _, l := range lines {
			it, err := Get(ctx, tx, l.SKU)
			if err != nil {
				return err
			}
			if it.Available+l.Delta < 0 {
				sh = append(sh, l.SKU)
				continue
			}
			res := tx.Exec(`UPDATE stock_items SET available = ?, fence = ?, version = version + 1, updated_at = ?
				WHERE sku = ? AND fence <= ? AND given_back = ?`, it.Available+l.Delta, l.token, now(), l.SKU, l.token, it.GivenBack)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 && it.Fence > l.token {
				return fmt.Errorf("%w: %s: token %d", ErrFenced, l.SKU, l.token)
			}
			if res.RowsAffected == 0 { // fenced or given back since the read: the next read tells
				return errGivenBack
			}
		}
		if err := sh.err(); err != nil {
			return err
		}
		plain := make([]Line, len(lines))
		for i, l := range lines {
			plain[i] = l.Line
		}
		if err := awaitLeases(tx, plain); err != nil {
			return err
		}
		return fn(Tx{tx})
	})
}

// claim raises sku's fence to token before the stock is read, in a
// statement of its own. A fenced write alone would leave a gap: a stale
// holder that writes after the new holder has read, but before it has
// written, still gets in, and the new holder then writes from a stale read.
// Once the new token is claimed, the stale holder's write is refused
// whenever it comes, and the new holder reads after it. Claiming in the
// transaction instead would hold the row lock until commit: the row lock
// would then do the lock's job, and hide whether the lock works.
func claim(ctx context.Context, gdb *gorm.DB, sku string, token int64) error {
	res := gdb.WithContext(ctx).Exec(`UPDATE stock_items SET fence = ? WHERE sku = ? AND fence <= ?`, token, sku, token)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected > 0 {
		return nil
	}
	it, err := Get(ctx, gdb, sku) // no row changed: missing, fenced, or claimed already
	if err != nil {
		return err
	}
	if it.Fence != token {
		return &fenceAhead{sku: sku, token: token, fence: it.Fence}
	}
	return nil
}

// fenceAhead is claim's ErrFenced: the SKU's fence is above token. Either
// a newer holder has claimed the SKU, or the lock's store has lost its
// count and hands out tokens from the start again; a lease that still
// holds its lock can tell the second case by raising its token
// (lock.Lease.Raise).
type fenceAhead struct {
	sku          string
	token, fence int64
}

func (e *fenceAhead) Error() string {
	return fmt.Sprintf("%v: %s: token %d, fence %d", ErrFenced, e.sku, e.token, e.fence)
}

func (e *fenceAhead) Unwrap() error { return ErrFenced }
