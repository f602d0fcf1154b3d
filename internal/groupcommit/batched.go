package groupcommit

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// Batched is group commit: an instance's buyers of one SKU share one
// transaction, which locks the stock row, grants buyers in arrival order as
// far as the stock and the per-user limit go, takes the granted units with
// one conditional UPDATE by the sum, inserts every order in one multi-row
// INSERT, and answers each buyer on its own (batch.go). While one batch
// commits, the next gathers (writer.go).
//
// Sold out is answered without queuing: a buyer reads the stock first,
// unless its SKU's writer runs and the last batch left stock. Carts with a
// key share batches of their own, one queue for all the instance's carts
// (carts.go). Refunds, and orders and carts without an Idempotency-Key,
// take one transaction each, as atomic does. See docs/strategies.md.
type Batched struct {
	db     *gorm.DB
	rules  order.Rules
	single stock.Guard // refunds, and orders without a key
	w      *Writer[struct{}]
	reads  *order.FirstReads
}

// NewBatched returns the group-commit strategy on gdb, whose batches
// apply rules.
func NewBatched(gdb *gorm.DB, rules order.Rules) *Batched {
	return &Batched{db: gdb, rules: rules, single: stock.NewQueued(gdb, stock.NewAtomic(gdb)),
		w: NewWriter[struct{}](gdb, "batched", Mode{Rules: rules}, nil, nil), reads: order.NewFirstReads(gdb)}
}

// Adjust implements the strategy for what does not batch: refunds, and
// orders without an Idempotency-Key.
func (b *Batched) Adjust(ctx context.Context, sku string, delta int, fn stock.Fn) error {
	return b.single.Adjust(ctx, sku, delta, fn)
}

// AdjustLines implements the strategy for carts without an
// Idempotency-Key, and refunds of carts: each takes one transaction of its
// own, as atomic does, its rows in ascending SKU order, as a batch of
// carts locks them, so no two wait for each other in a circle.
func (b *Batched) AdjustLines(ctx context.Context, lines []stock.Line, fn stock.Fn) error {
	return b.single.AdjustLines(ctx, lines, fn)
}

// Place implements order.Placer: it queues r for the SKU's next batch and waits
// for its answer.
func (b *Batched) Place(ctx context.Context, r order.PlaceRequest) (order.Order, bool, error) {
	if !b.w.Stocked(r.SKU) {
		// Sold out is answered at once, by a read that takes no lock.
		if o, found, err := b.reads.First(ctx, r); found || err != nil {
			return o, found, err
		}
	}
	o, replayed, err := b.w.Submit(&Request[struct{}]{Ctx: ctx, Order: r})
	return b.reads.CheckRefusal(ctx, r, o, replayed, err)
}

// PlaceCart implements order.CartPlacer: it queues r for the next batch
// of carts and waits for its answer. A refusal may be because the key's
// own order, placed meanwhile, took the stock: that order is its answer.
func (b *Batched) PlaceCart(ctx context.Context, r order.PlaceRequest) (order.Order, bool, error) {
	o, replayed, err := b.w.SubmitCart(&Request[struct{}]{Ctx: ctx, Order: r})
	if errors.Is(err, stock.ErrSoldOut) || errors.Is(err, order.ErrLimitReached) {
		return order.ReplayOr(ctx, b.db, r, err)
	}
	return o, replayed, err
}

// Placement is what the service places through under batched: its own
// placement of orders and carts with a key, and its guard for the rest.
func (b *Batched) Placement() order.Placement {
	return order.Placement{Guard: b, Placer: b, Carts: b, Rules: b.rules, Close: b.Close}
}

// Close answers the buyers its writer holds and waits for its writers and
// first reads. A buyer who comes after it is answered busy.
func (b *Batched) Close() {
	b.w.Close()
	b.reads.Close()
}
