package order

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/stock"
)

// Adjust applies an operator's adjustment m (a delta, a reason, a
// reference, and its Idempotency-Key) to m.SKU's stock, through the
// strategy's guard as a purchase's change goes, and records it as a
// movement in the same transaction. It returns the movement. The key is
// kept where the adjustment is decided: the unique (sku, idempotency_key)
// index of stock_movements, so that a replay never applies twice, even
// when the HTTP layer's key store has forgotten it. A repeat of the same
// adjustment gets its movement again, replayed; a key used for another
// adjustment is refused (idempotency.ErrKeyReused). An adjustment that would take
// available below 0 changes nothing (stock.ErrInsufficient).
func (s *Service) Adjust(ctx context.Context, m stock.Movement) (stock.Movement, bool, error) {
	if m.Key == nil || *m.Key == "" || m.Delta == 0 || !m.Reason.Adjustable() {
		return stock.Movement{}, false, fmt.Errorf("order: adjust: an adjustment needs a key, a delta and a reason of %v", stock.AdjustmentReasons)
	}
	m.Actor = stock.ActorAdmin
	if first, found, err := s.adjusted(ctx, m); found || err != nil {
		return first, found, err
	}
	err := s.strategy.Guard.Adjust(ctx, m.SKU, m.Delta, func(tx stock.Tx) error { return tx.Record(m) })
	switch {
	case db.IsDuplicate(err):
		// The key's first adjustment committed while this one ran.
		first, found, err := s.adjusted(ctx, m)
		if err == nil && !found {
			err = fmt.Errorf("%w: the key's movement is not found", stock.ErrBusy)
		}
		return first, found, err
	case errors.Is(err, stock.ErrSoldOut):
		return stock.Movement{}, false, fmt.Errorf("order: adjust: %w: %s by %d", stock.ErrInsufficient, m.SKU, m.Delta)
	case err != nil:
		return stock.Movement{}, false, fmt.Errorf("order: adjust: %w", err)
	}
	first, found, err := s.adjusted(ctx, m)
	if err == nil && !found {
		err = fmt.Errorf("order: adjust: the movement of %s with key %q is not found", m.SKU, *m.Key)
	}
	return first, false, err
}

// adjusted returns the movement that m's key already has: found, or
// idempotency.ErrKeyReused if it is another adjustment.
func (s *Service) adjusted(ctx context.Context, m stock.Movement) (stock.Movement, bool, error) {
	first, found, err := stock.Keyed(ctx, s.db, m.SKU, *m.Key)
	switch {
	case err != nil:
		return stock.Movement{}, false, fmt.Errorf("order: adjust: %w: %w", stock.ErrBusy, err)
	case found && !first.Same(m):
		return stock.Movement{}, false, fmt.Errorf("order: adjust: %w: its first adjustment was %+d (%s)", idempotency.ErrKeyReused, first.Delta, first.Reason)
	}
	return first, found, nil
}

// Movements returns up to limit of sku's movements with an id above
// after, oldest first; ErrNotFound (of stock) if sku has none.
func (s *Service) Movements(ctx context.Context, sku string, after int64, limit int) ([]stock.Movement, error) {
	if _, err := stock.Get(ctx, s.db, sku); err != nil {
		return nil, err
	}
	ms, err := stock.Movements(ctx, s.db, sku, after, limit)
	if err != nil {
		return nil, fmt.Errorf("order: movements: %w", err)
	}
	return ms, nil
}
