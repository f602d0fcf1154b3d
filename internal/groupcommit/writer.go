package order

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/backoff"
	"github.com/stockguard/shop/internal/batch"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/tracing"
)

// writer is the group-commit writer of batched and lua: it queues an
// instance's buyers per SKU and commits each SKU's batches one after
// another, one transaction each (batch.go).
type writer struct {
	db   *gorm.DB
	name string // the strategy's, in the metrics
	// settle, if set, runs once a batch has committed, before its buyers
	// are answered, with the batch's span in its ctx: lua acknowledges its
	// reservations there.
	settle func(ctx context.Context, sku string, batch []*pending, answers []Answer)

	skus *batch.Batcher[string, *pending]

	mu   sync.Mutex
	last map[string]lastBatch // of each SKU whose writer runs, once a batch ended

	idsOnce sync.Once
	ids     IDSource
}

func newWriter(gdb *gorm.DB, name string) *writer {
	w := &writer{db: gdb, name: name, last: make(map[string]lastBatch)}
	w.skus = batch.New(maxBatch, w.write, w.forget)
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

// pending is one buyer waiting for its batch.
type pending struct {
	ctx   context.Context
	r     PlaceRequest
	rules Rules
	done  chan Answer // buffered: the writer never waits for the buyer
	// entry is the reservation's id in lua's stream, and epoch the epoch
	// of the Redis state it was taken from; empty and 0 for batched.
	entry string
	epoch int64
	// bucket names the Redis stock it was taken from: the SKU, or one of
	// its buckets (stock.BucketOf).
	bucket string
}

// Answer is a buyer's answer.
type Answer struct {
	Order        Order
	Replayed bool
	Err      error
}

// submit queues p for its SKU's next batch and waits for its answer.
func (w *writer) submit(p *pending) (Order, bool, error) {
	p.done = make(chan Answer, 1)
	if err := w.skus.Add(p.r.SKU, p); err != nil {
		return Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, ErrClosed)
	}
	select {
	case res := <-p.done:
		return res.Order, res.Replayed, res.Err
	case <-p.ctx.Done():
		return Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, context.Cause(p.ctx))
	}
}

// ErrClosed answers a buyer who comes once the shop is closing.
var ErrClosed = errors.New("order: the shop is closing")

// close waits for every SKU's writer to answer its buyers, once no new
// writer may start.
func (w *writer) close() { w.skus.Close() }

// stocked reports whether sku's writer runs and its last batch left stock.
func (w *writer) stocked(sku string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[sku] == leftStock
}

// forget drops what sku's batches left once its writer stops.
func (w *writer) forget(sku string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, sku)
}

// write commits one batch of the SKU. Once a batch has left no stock, the
// buyers who queued meanwhile are refused without one, but for lua's: a
// lua reservation holds units in Redis, and a batch decides it, so that
// it is settled.
func (w *writer) write(sku string, queued []*pending) {
	w.mu.Lock()
	last := w.last[sku]
	w.mu.Unlock()
	if last == leftNone {
		kept := queued[:0]
		for _, p := range queued {
			if p.entry != "" {
				kept = append(kept, p)
				continue
			}
			p.done <- Answer{Err: SoldOut(sku)}
		}
		if queued = kept; len(queued) == 0 {
			return
		}
	}
	left, ok := w.commit(sku, queued)
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

// commit runs one batch's transaction, again while any buyer in it still
// waits after a deadlock, a lock-wait timeout or a lost connection, and
// answers them. Once the batch has committed, it reports ok and the stock
// it left.
func (w *writer) commit(sku string, batch []*pending) (left int, ok bool) {
	metrics.BatchSize.WithLabelValues(w.name).Observe(float64(len(batch)))
	defer func(start time.Time) {
		metrics.BatchCommit.WithLabelValues(w.name).Observe(time.Since(start).Seconds())
	}(time.Now())
	// The first attempt assumes that no key of the batch has an order yet,
	// which is almost always so (the key store answers retries): should one
	// have, the INSERT fails on the unique index, and the batch runs again
	// at once, with the keys looked up.
	lookedUp := false
	traced, span := traceBatch(w.db.Dialector.Name(), w.name, sku, batch)
	defer span.End()
	for attempt := 0; ; attempt++ {
		ctx, cancel := waiting(pendingCtxs(batch))
		ctx = trace.ContextWithSpan(ctx, span)
		if ctx.Err() != nil {
			cancel()
			return 0, false // every buyer has been answered busy
		}
		var answers []Answer
		var known map[UserKey]Order // nil: no key has an order
		var err error
		if lookedUp {
			known, err = lookup(ctx, w.db, batch)
		}
		if err == nil {
			err = w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) (err error) {
				answers, left, err = decide(tx, sku, batch, known, w.idSource(tx))
				return err
			})
		}
		cancel()
		if db.IsDuplicate(err) && !lookedUp {
			lookedUp = true
			continue
		}
		if err == nil {
			if w.settle != nil {
				w.settle(traced, sku, batch, answers)
			}
			for i, p := range batch {
				p.done <- answers[i]
			}
			return left, true
		}
		// A duplicate key now means another SKU's batch inserted one of
		// these keys after this batch looked, or this very batch committed
		// and its answer was lost with the connection: the next attempt
		// finds it. A lost connection is tried again too, while buyers
		// wait: a lua reservation is taken already, and its buyer would
		// otherwise wait for the reconciler's claim.
		if !db.IsRetryable(err) && !db.IsDuplicate(err) && !backend.Unavailable(err) {
			tracing.End(span, err)
			for _, p := range batch {
				p.done <- Answer{Err: fmt.Errorf("order: place: %w", err)}
			}
			return 0, false
		}
		wait, stop := waiting(pendingCtxs(batch))
		err = backoff.Wait(wait, attempt)
		stop()
		if err != nil {
			return 0, false // every buyer has been answered busy
		}
	}
}

func pendingCtxs(batch []*pending) []context.Context {
	ctxs := make([]context.Context, len(batch))
	for i, p := range batch {
		ctxs[i] = p.ctx
	}
	return ctxs
}

// idSource is how a batch learns its orders' ids, asked once.
func (w *writer) idSource(tx *gorm.DB) IDSource {
	w.idsOnce.Do(func() { w.ids = IDSourceOf(tx) })
	return w.ids
}
