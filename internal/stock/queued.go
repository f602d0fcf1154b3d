package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"gorm.io/gorm"
)

// Queued stands in front of a guard and keeps sold-out answers out of its
// queue. A buyer first reads the stock with a plain read, which waits for
// no lock, and hears ErrSoldOut at once if it is short; otherwise it waits
// its turn in this process, one change of a SKU at a time reaching the
// guard, and when the guard answers one buyer sold out, every buyer
// waiting then is told so at once. Nothing is cached, so a refunded unit
// is sellable at once on every instance. A give-back (every delta > 0:
// an expiry, a cancel, a refund) never queues: it goes to the guard at
// once. See docs/strategies.md#sold-out-answers-never-queue.
type Queued struct {
	db    *gorm.DB
	guard Guard
	relay relay // guard, when it keeps a lease for the next buyer (QueueLocked); else nil

	mu   sync.Mutex
	skus map[string]*skuQueue
}

// skuQueue is the queue of one SKU, kept while anyone is in it.
type skuQueue struct {
	turn    chan struct{} // holds one value while a change is at the guard
	refs    int           // buyers in the queue, at the guard or waiting
	tickets uint64        // the last ticket handed out
	// A waiter whose ticket is at most soldOutTicket, and who wants at least
	// need units, is sold out: the stock was read below need while it
	// waited. wake is closed whenever soldOutTicket rises.
	soldOutTicket uint64
	need          int
	wake          chan struct{}
	stocked       bool // the guard's last answer to a buyer was a sale
}

// NewQueued returns guard behind a queue per SKU in this process.
func NewQueued(gdb *gorm.DB, guard Guard) *Queued {
	return &Queued{db: gdb, guard: guard, skus: make(map[string]*skuQueue)}
}

// QueueLocked is NewQueued of a lock strategy's guard, which passes a
// lease that sold to the next buyer of the SKU waiting in this queue.
func QueueLocked(gdb *gorm.DB, l *Locked) *Queued {
	q := NewQueued(gdb, l)
	q.relay = l
	return q
}

// FirstRead is a purchase's first read, the plain read that Queued makes
// before the purchase queues. It ends the purchase with its error, such as
// ErrSoldOut when the stock is short, or lets it queue with nil.
type FirstRead func(ctx context.Context) error

// Adjust implements the strategy.
func (q *Queued) Adjust(ctx context.Context, sku string, delta int, fn Fn) error {
	return q.AdjustAfter(ctx, sku, delta, func(ctx context.Context) error {
		it, err := Get(ctx, q.db, sku)
		if err != nil {
			return busyIfDone(ctx, err)
		}
		if it.Available+delta < 0 {
			return soldOut(sku)
		}
		return nil
	}, fn)
}

// AdjustLines implements the strategy for a cart. A plain read of every
// line answers at once when any is short, naming each short SKU. Then the
// cart takes its SKUs' turns in ascending order, as every cart does, and
// holds them all while the guard changes its lines; a single-SKU buyer
// holds one turn only, so no two buyers wait for each other in a circle.
// On each turn it drops the lease a relay kept for the SKU: a lease kept
// while the cart waits for its higher turns would be a lock held out of
// ascending order, which a cart of another process, holding a lower SKU's
// lock, could wait for for ever.
// A cart's refusal is not told to the buyers waiting behind it: each line
// alone might have sold.
func (q *Queued) AdjustLines(ctx context.Context, lines []Line, fn Fn) error {
	if givingBack(lines) {
		return q.guard.AdjustLines(ctx, lines, fn)
	}
	if len(lines) == 1 {
		return q.Adjust(ctx, lines[0].SKU, lines[0].Delta, fn)
	}
	lines = Sorted(lines)
	if slices.ContainsFunc(lines, func(l Line) bool { return l.Delta < 0 }) {
		_, sh, err := read(ctx, q.db, lines)
		if err != nil {
			return busyIfDone(ctx, err)
		}
		if err := sh.err(); err != nil {
			return err
		}
	}
	for _, l := range lines {
		ln, ticket := q.enter(l.SKU)
		defer q.leave(l.SKU, ln)
		if err := q.wait(ctx, ln, ticket, 0); err != nil {
			return fmt.Errorf("%w: %s", err, l.SKU)
		}
		defer func() { <-ln.turn }()
		if q.relay != nil {
			q.relay.drop(l.SKU)
		}
	}
	if q.relay != nil {
		return q.relay.adjustThen(ctx, lines, fn, q.waiting)
	}
	return q.guard.AdjustLines(ctx, lines, fn)
}

// AdjustAfter is Adjust with the caller's own first read: first runs
// where Adjust would read the stock, so that a caller can read what it
// needs in the same statement.
func (q *Queued) AdjustAfter(ctx context.Context, sku string, delta int, first FirstRead, fn Fn) error {
	if delta > 0 {
		return q.guard.Adjust(ctx, sku, delta, fn)
	}
	if delta < 0 && !q.stocked(sku) {
		if err := first(ctx); err != nil {
			return err
		}
	}
	l, ticket := q.enter(sku)
	defer q.leave(sku, l)
	if err := q.wait(ctx, l, ticket, -delta); errors.Is(err, ErrSoldOut) {
		return soldOut(sku)
	} else if err != nil {
		return fmt.Errorf("%w: %s", err, sku)
	}
	defer func() { <-l.turn }()
	var err error
	if q.relay != nil {
		err = q.relay.adjustThen(ctx, []Line{{SKU: sku, Delta: delta}}, fn, q.waiting)
	} else {
		err = q.guard.Adjust(ctx, sku, delta, fn)
	}
	if delta < 0 && (err == nil || errors.Is(err, ErrSoldOut)) {
		q.mu.Lock()
		l.stocked = err == nil
		q.mu.Unlock()
	}
	if delta < 0 && errors.Is(err, ErrSoldOut) {
		q.tellWaiting(ctx, sku, l)
	}
	return err
}

// waiting reports whether another buyer of sku than the one at the guard
// waits in this process.
func (q *Queued) waiting(sku string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.skus[sku]
	return l != nil && l.refs > 1
}

// stocked reports whether sku's queue is in use and its last buyer bought.
func (q *Queued) stocked(sku string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.skus[sku]
	return l != nil && l.stocked
}

// tellWaiting reads the stock again, with a plain read, and tells every
// buyer waiting in l that wants more than is left that it is sold out. They
// were all waiting when the stock was read, so the answer was true while
// each of them waited, even if a refund returns a unit just after.
func (q *Queued) tellWaiting(ctx context.Context, sku string, l *skuQueue) {
	q.mu.Lock()
	waiting := l.tickets
	q.mu.Unlock()
	it, err := Get(ctx, q.db, sku)
	if err != nil {
		return // they wait their turn, as without the queue
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if waiting > l.soldOutTicket {
		l.soldOutTicket, l.need = waiting, max(it.Available+1, 1)
		close(l.wake)
		l.wake = make(chan struct{})
	}
}

// wait returns once it is the ticket's turn, or with ErrSoldOut once the
// stock was read too short for want units while it waited (want <= 0 for a
// change that takes none, which is never sold out), or with ErrBusy when
// ctx ends.
func (q *Queued) wait(ctx context.Context, l *skuQueue, ticket uint64, want int) error {
	for {
		q.mu.Lock()
		if want > 0 && ticket <= l.soldOutTicket && want >= l.need {
			q.mu.Unlock()
			return ErrSoldOut
		}
		wake := l.wake
		q.mu.Unlock()
		select {
		case l.turn <- struct{}{}:
			return nil
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrBusy, context.Cause(ctx))
		}
	}
}

func (q *Queued) enter(sku string) (*skuQueue, uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.skus[sku]
	if l == nil {
		l = &skuQueue{turn: make(chan struct{}, 1), wake: make(chan struct{})}
		q.skus[sku] = l
	}
	l.refs++
	l.tickets++
	return l, l.tickets
}

// leave takes a buyer out of l. The last one out has the guard drop what
// it kept for the queue.
func (q *Queued) leave(sku string, l *skuQueue) {
	q.mu.Lock()
	l.refs--
	empty := l.refs == 0
	if empty {
		delete(q.skus, sku)
	}
	q.mu.Unlock()
	if q.relay != nil && empty {
		q.relay.drop(sku)
	}
}

// relay is a guard that can keep what it holds for the next change of the
// same SKU in this process, as Locked keeps its lease.
type relay interface {
	// adjustThen is AdjustLines, of lines in ascending SKU order; after
	// it, waiting says whether another change of a SKU waits in this
	// process.
	adjustThen(ctx context.Context, lines []Line, fn Fn, waiting func(sku string) bool) error
	// drop gives up what is kept for sku: no change of it waits any more.
	drop(sku string)
}
