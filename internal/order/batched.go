package order

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

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
// unless its SKU's writer runs and the last batch left stock. Refunds, and
// orders without an Idempotency-Key, take one transaction each, as atomic
// does. With BatchedOptions.Answers it keeps its buyers' Idempotency-Keys
// itself (kept.go). See docs/strategies.md.
type Batched struct {
	db     *gorm.DB
	single stock.Guard // refunds, and orders without a key
	w      *writer
	reads  *firstReads
	claims claims
	kept   *keptAnswers // nil: the HTTP layer keeps the keys
}

var (
	_ placer    = (*Batched)(nil)
	_ keyKeeper = (*Batched)(nil)
)

// BatchedOptions configure Batched; nil is valid.
type BatchedOptions struct {
	// Answers, when set, is the Redis where Batched keeps its buyers'
	// refusals, for AnswerTTL (default 24h), each key under Prefix: it
	// keeps their Idempotency-Keys itself.
	Answers   redis.UniversalClient
	Prefix    string
	AnswerTTL time.Duration
}

// NewBatched returns the group-commit strategy on gdb.
func NewBatched(gdb *gorm.DB, opts *BatchedOptions) *Batched {
	b := &Batched{db: gdb, single: stock.NewQueued(gdb, stock.NewAtomic(gdb)), w: newWriter(gdb, "batched"), reads: newFirstReads(gdb)}
	if opts != nil && opts.Answers != nil {
		b.kept = newKeptAnswers(opts.Answers, opts.Prefix, opts.AnswerTTL)
	}
	return b
}

// keepsKeys implements keyKeeper, when Batched keeps refusals.
func (b *Batched) keepsKeys() bool { return b.kept != nil }

// Adjust implements the strategy for what does not batch: refunds, and
// orders without an Idempotency-Key.
func (b *Batched) Adjust(ctx context.Context, sku string, delta int, fn stock.Fn) error {
	return b.single.Adjust(ctx, sku, delta, fn)
}

// place implements placer: it queues r for the SKU's next batch and waits
// for its answer, keeping r's key if Batched keeps keys.
func (b *Batched) place(ctx context.Context, r PlaceRequest, limit int) (Order, bool, error) {
	if b.kept == nil {
		return b.batch(ctx, r, limit)
	}
	return keepingKeys(ctx, &b.claims, b.kept, r, func() (Order, bool, error) { return b.batch(ctx, r, limit) })
}

func (b *Batched) batch(ctx context.Context, r PlaceRequest, limit int) (Order, bool, error) {
	if !b.w.stocked(r.SKU) {
		// Sold out is answered at once, by a read that takes no lock.
		if o, found, err := b.reads.first(ctx, r); found || err != nil {
			return o, found, err
		}
	}
	o, replayed, err := b.w.submit(&pending{ctx: ctx, r: r, limit: limit})
	return b.reads.checkRefusal(ctx, r, o, replayed, err)
}
