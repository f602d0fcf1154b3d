package lua

import (
	"context"
	"slices"

	"github.com/stockguard/shop/internal/order"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/stock"
)

// lua's stock changes other than a purchase: refunds, stock changes and
// new sales, each in the database first, then in Redis.

// Adjust implements the strategy for orders without an Idempotency-Key,
// which the HTTP API never sends, and refunds: the change commits in the
// database, then goes to Redis.
func (l *Lua) Adjust(ctx context.Context, sku string, delta int, fn stock.Fn) error {
	return l.adjust(ctx, []stock.Line{{SKU: sku, Delta: delta}}, "", only(fn))
}

// AdjustLines is Adjust for several lines.
func (l *Lua) AdjustLines(ctx context.Context, lines []stock.Line, fn stock.Fn) error {
	return l.adjust(ctx, lines, "", only(fn))
}

// Refund implements Refunder: it returns o's units, to the database and then to Redis, and takes
// them off what its user holds there.
func (l *Lua) Refund(ctx context.Context, o order.Order, fn stock.Fn) error {
	return l.adjust(ctx, o.Returns(), o.UserID, only(fn))
}

// Restock implements Restocker, SetStock's change of an existing SKU: set changes
// the stock in the database, under the stock row's lock, and Redis then
// takes the same change, in the same epoch, without a rebuild.
func (l *Lua) Restock(ctx context.Context, sku string, set func(tx stock.Tx) (int, error)) error {
	return l.adjust(ctx, []stock.Line{{SKU: sku}}, "", set)
}

// only is fn as adjust takes it: it changes no stock beyond the lines.
func only(fn stock.Fn) func(tx stock.Tx) (int, error) {
	return func(tx stock.Tx) (int, error) { return 0, fn(tx) }
}

// adjust applies lines, and whatever more fn changes of the first line's
// stock in the same transaction, to the database and then to Redis.
func (l *Lua) adjust(ctx context.Context, lines []stock.Line, user string, fn func(tx stock.Tx) (int, error)) error {
	lines = stock.Sorted(lines)
	epochs := make([]int64, len(lines))
	change := slices.Clone(lines) // what reaches Redis: the last attempt's, should the transaction run again
	err := l.single.AdjustLines(ctx, lines, func(tx stock.Tx) error {
		more, err := fn(tx)
		if err != nil {
			return err
		}
		change[0].Delta = lines[0].Delta + more
		// Read under the stock rows' locks, which a rebuild takes too: a
		// state of this epoch was built without this change, one of a
		// later epoch with it. So the change reaches Redis exactly once.
		for i, ln := range lines {
			if epochs[i], err = tx.Epoch(ln.SKU); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), order.RedisTimeout)
	defer cancel()
	for i, c := range change {
		if l.buckets > 1 && c.Delta < 0 {
			// Which buckets to take it from is the rebuild's to say.
			l.fix(c.SKU)
			continue
		}
		// Units that come back go to bucket 0, where the last units of a
		// sale gather (shares).
		if _, err := l.redis.Adjust(rctx, c.SKU, epochs[i], c.Delta, user, l.rules.Limit > 0); err != nil {
			l.dropped(rctx, "adjust", err)
			l.fix(c.SKU) // the database has the change; Redis gets it from there
		}
	}
	return nil
}

// NewSale implements Sale: a new epoch, in the transaction that sets
// the SKU up, so that no state built before it sells again.
func (l *Lua) NewSale(tx *gorm.DB, sku string) error {
	_, err := stock.NextEpoch(tx, sku)
	return err
}

// Forget implements Sale: it drops the SKU's Redis state.
func (l *Lua) Forget(ctx context.Context, sku string) error {
	l.mu.Lock()
	delete(l.epochs, sku)
	l.mu.Unlock()
	for _, name := range l.bucketNames(sku) {
		if err := l.redis.Forget(ctx, name); err != nil {
			return err
		}
	}
	return nil
}
