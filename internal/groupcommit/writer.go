package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/background"
	"github.com/stockguard/shop/internal/backoff"
	"github.com/stockguard/shop/internal/batch"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/tracing"
)

// Writer is the group-commit writer: it queues an instance's buyers per
// SKU and commits each SKU's batches one after another, one transaction
// each (decide.go). M is what its caller keeps with each request, and
// gets back once the request's batch has committed (AfterCommit).
type Writer[M any] struct {
	db    *gorm.DB
	name  string         // the strategy's, in the metrics
	mode  Mode           // how its batches decide
	after AfterCommit[M] // nil for none

	skus *batch.Batcher[string, *Request[M]]
	// carts queues every cart of the instance under one key: a batch of
	// carts locks the rows of all their SKUs, in ascending order (carts.go).
	carts      *batch.Batcher[string, *Request[M]]
	afterCarts AfterCarts[M] // nil for none

	mu   sync.Mutex
	last map[string]lastBatch // of each SKU whose writer runs, once a batch ended

	idsOnce sync.Once
	ids     order.IDSource

	retries *background.Group // held requests whose batch did not commit, waiting to be tried again (retry.go)
}

// AfterCommit runs once a batch of sku has committed, with each request's
// answer, before the buyers hear them, with the batch's span in its ctx:
// a caller that holds its requests' units elsewhere (Mode.Held) ends its
// holds there.
type AfterCommit[M any] func(ctx context.Context, sku string, batch []*Request[M], answers []order.Answer)

// AfterCarts runs once a batch of carts has ended, with each request's
// answer, before the buyers hear them, with the batch's span in its ctx.
// Unlike AfterCommit, it runs for every cart that SubmitCart queued,
// exactly once, whether its batch committed or not: a caller that holds a
// cart's units elsewhere ends its holds there, kept or given back by its
// answer.
type AfterCarts[M any] func(ctx context.Context, batch []*Request[M], answers []order.Answer)

// Mode is how a writer's batches decide, chosen when it is made.
type Mode struct {
	// Rules are the per-user limit and the payment window its batches
	// apply.
	Rules order.Rules
	// Held says that its requests' units are held already, elsewhere (by
	// the caller, before the database), each taken from
	// the SKU's sale of its Request.Epoch (stock.Epoch): a batch decides
	// every request even once the SKU sold out or its buyer stopped
	// waiting, and refuses one, busy, when the SKU's sale is of another
	// epoch by then. Batched's requests hold nothing: its batches take
	// their units, and only for buyers who still wait (decide.go, left).
	Held bool
}

// NewWriter returns a writer on gdb whose batches decide in mode, named in
// the metrics as the strategy name; after and afterCarts may be nil.
func NewWriter[M any](gdb *gorm.DB, name string, mode Mode, after AfterCommit[M], afterCarts AfterCarts[M]) *Writer[M] {
	w := &Writer[M]{db: gdb, name: name, mode: mode, after: after, afterCarts: afterCarts, last: make(map[string]lastBatch), retries: background.New()}
	w.skus = batch.New(maxBatch, w.write, w.forget)
	w.carts = batch.New(maxBatch, w.writeCarts, nil)
	return w
}

// lastBatch is what a SKU's last batch left.
type lastBatch int

const (
	// leftUnknown: it did not commit.
	leftUnknown lastBatch = iota
	// leftStock: it committed and left stock. Until a first batch has, or
	// once one leaves none, buyers read the stock first.
	leftStock
	// leftNone: it committed and left none.
	leftNone
)

// maxBatch bounds a batch. The group-commit loop of `shop bench`
// (sql-batched) sells tens of thousands of orders a second at 100 orders a
// transaction on a 2-core machine, far beyond what one instance's HTTP stack
// brings it; a larger batch only makes each commit, and every buyer in it,
// wait longer.
const maxBatch = 128

// Request is one buyer's order, waiting for its batch.
type Request[M any] struct {
	Ctx   context.Context
	Order order.PlaceRequest
	// Epoch is the SKU's sale in which the order's units were held, in a
	// writer of Mode.Held.
	Epoch int64
	// Epochs are a held cart's: each line's epoch, in the order of
	// Order.Items.
	Epochs []int64
	// Meta is the caller's, handed back to its AfterCommit.
	Meta M
	// Retry, in a writer of Mode.Held, says that the request's units are
	// held for this process alone: should its batch not commit before its
	// buyer stops waiting, the writer tries it again in later batches
	// until one commits it, or the writer closes (retry.go). Of Submit
	// only.
	Retry bool

	made   sync.Once
	done   chan struct{} // closed once answer is set
	ended  sync.Once
	answer order.Answer
	retry  retryState // of a request tried again
}

// Submit queues r for its SKU's next batch and waits for its answer.
func (w *Writer[M]) Submit(r *Request[M]) (order.Order, bool, error) {
	ctx := r.Ctx // a retry's batches run on a ctx of their own
	if err := w.skus.Add(r.Order.SKU, r); err != nil {
		closing([]*Request[M]{r})
	}
	return r.Wait(ctx)
}

// Wait waits, as long as ctx lasts, for the answer of r, once Submit has
// queued it: another buyer of the same request waits for it too, with a
// ctx of its own. A request of Retry is answered once a batch commits it,
// or the writer closes.
func (r *Request[M]) Wait(ctx context.Context) (order.Order, bool, error) {
	select {
	case <-r.Done():
		return r.answer.Order, r.answer.Replayed, r.answer.Err
	case <-ctx.Done():
		return order.Order{}, false, stopped(ctx)
	}
}

// Done is closed once r has its answer.
func (r *Request[M]) Done() <-chan struct{} { return r.finished() }

func (r *Request[M]) finished() chan struct{} {
	r.made.Do(func() { r.done = make(chan struct{}) })
	return r.done
}

// end gives r its answer, once.
func (r *Request[M]) end(a order.Answer) {
	done := r.finished()
	r.ended.Do(func() {
		r.retry.stop()
		r.answer = a
		close(done)
	})
}

// stopped is the answer of a buyer who stopped waiting, its ctx done:
// busy.
func stopped(ctx context.Context) error {
	return fmt.Errorf("order: place: %w: %w", stock.ErrBusy, context.Cause(ctx))
}

// Close waits for every SKU's writer, and the carts', to answer its
// buyers, once no new writer may start; the requests it was trying again
// are answered busy.
func (w *Writer[M]) Close() {
	w.retries.End()
	w.skus.Close()
	w.carts.Close()
}

// Stocked reports whether sku's writer runs and its last batch left stock.
func (w *Writer[M]) Stocked(sku string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[sku] == leftStock
}

// forget drops what sku's batches left once its writer stops.
func (w *Writer[M]) forget(sku string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, sku)
}

// write commits one batch of the SKU. Once a batch has left no stock, the
// buyers who queued meanwhile are refused without one, unless their units
// are held elsewhere (Mode.Held): a batch decides each of them, so that
// its caller settles it.
func (w *Writer[M]) write(sku string, queued []*Request[M]) {
	w.mu.Lock()
	last := w.last[sku]
	w.mu.Unlock()
	if last == leftNone && !w.mode.Held {
		for _, p := range queued {
			p.end(order.Answer{Err: order.SoldOut(sku)})
		}
		return
	}
	after := func(ctx context.Context, answers []order.Answer, committed bool) {
		if committed && w.after != nil {
			w.after(ctx, sku, queued, answers)
		}
	}
	left, ok := w.commit(sku, queued, decide[M], after)
	switch {
	case !ok:
		last = leftUnknown
	case left > 0:
		last = leftStock
	default:
		last = leftNone
	}
	w.mu.Lock()
	w.last[sku] = last
	w.mu.Unlock()
}

// decider is one batch's transaction: decide for a SKU's orders,
// decideCarts for carts. It returns each request's answer and the stock
// of sku it leaves.
type decider[M any] func(tx *gorm.DB, m Mode, sku string, batch []*Request[M], known map[order.UserKey]order.Order, ids order.IDSource) ([]order.Answer, int, error)

// commit runs one batch's transaction, again while any buyer in it still
// waits after a deadlock, a lock-wait timeout or a lost connection, and
// answers them, once after has run with their answers and whether the
// batch committed. Once the batch has committed, it reports ok and the
// stock it left. sku is "" for a batch of carts.
func (w *Writer[M]) commit(sku string, reqs []*Request[M], run decider[M], after func(context.Context, []order.Answer, bool)) (left int, ok bool) {
	metrics.BatchSize.WithLabelValues(w.name).Observe(float64(len(reqs)))
	defer func(start time.Time) {
		metrics.BatchCommit.WithLabelValues(w.name).Observe(time.Since(start).Seconds())
	}(time.Now())
	// The first attempt assumes that no key of the batch has an order yet,
	// which is almost always so (the key store answers retries): should one
	// have, the INSERT fails on the unique index, and the batch runs again
	// at once, with the keys looked up.
	lookedUp := false
	traced, span := traceBatch(w.db.Dialector.Name(), w.name, sku, reqs)
	defer span.End()
	for attempt := 0; ; attempt++ {
		ctx, cancel := batch.Waiting(ctxsOf(reqs))
		ctx = trace.ContextWithSpan(ctx, span)
		if ctx.Err() != nil {
			cancel()
			w.answer(traced, sku, reqs, busy(reqs), false, after)
			return 0, false // every buyer has been answered busy
		}
		var answers []order.Answer
		var known map[order.UserKey]order.Order // nil: no key has an order
		var err error
		if lookedUp {
			known, err = lookup(ctx, w.db, reqs)
		}
		if err == nil {
			err = w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) (err error) {
				answers, left, err = run(tx, w.mode, sku, reqs, known, w.idSource(tx))
				return err
			})
		}
		ended := ctx.Err() != nil // its buyers stopped waiting mid-attempt
		cancel()
		if db.IsDuplicate(err) && !lookedUp {
			lookedUp = true
			continue
		}
		if err == nil {
			w.answer(traced, sku, reqs, answers, true, after)
			return left, true
		}
		// A duplicate key now means another SKU's batch inserted one of
		// these keys after this batch looked, or this very batch committed
		// and its answer was lost with the connection: the next attempt
		// finds it. A lost connection is tried again too, while buyers
		// wait: under Mode.Held, the units are held already, and the
		// buyer would otherwise wait for the caller to recover them. A
		// statement cut by the end of the batch's ctx is busy.
		if !ended && !db.IsRetryable(err) && !db.IsDuplicate(err) && !backend.Unavailable(err) {
			tracing.End(span, err)
			answers := make([]order.Answer, len(reqs))
			for i := range answers {
				answers[i].Err = fmt.Errorf("order: place: %w", err)
			}
			w.answer(traced, sku, reqs, answers, false, after)
			return 0, false
		}
		wait, stop := batch.Waiting(ctxsOf(reqs))
		err = backoff.Wait(wait, attempt)
		stop()
		if err != nil {
			w.answer(traced, sku, reqs, busy(reqs), false, after)
			return 0, false // every buyer has been answered busy
		}
	}
}

// answer runs after with the batch's answers, then gives each buyer its
// own. A buyer who has stopped waiting has heard busy already. A request
// of Retry (of sku: never a cart) whose batch did not commit, busy, is
// tried again instead.
func (w *Writer[M]) answer(ctx context.Context, sku string, reqs []*Request[M], answers []order.Answer, committed bool, after func(context.Context, []order.Answer, bool)) {
	after(ctx, answers, committed)
	var again []*Request[M]
	for i, p := range reqs {
		if !committed && p.Retry && sku != "" && errors.Is(answers[i].Err, stock.ErrBusy) {
			again = append(again, p)
			continue
		}
		p.end(answers[i])
	}
	if len(again) > 0 {
		w.again(sku, again)
	}
}

// busy is the answer of a batch whose buyers all stopped waiting before
// it committed.
func busy[M any](reqs []*Request[M]) []order.Answer {
	answers := make([]order.Answer, len(reqs))
	for i, p := range reqs {
		answers[i].Err = stopped(p.waiting())
	}
	return answers
}

func ctxsOf[M any](reqs []*Request[M]) []context.Context {
	ctxs := make([]context.Context, len(reqs))
	for i, r := range reqs {
		ctxs[i] = r.waiting()
	}
	return ctxs
}

// idSource is how a batch learns its orders' ids, asked once.
func (w *Writer[M]) idSource(tx *gorm.DB) order.IDSource {
	w.idsOnce.Do(func() { w.ids = order.IDSourceOf(tx) })
	return w.ids
}
