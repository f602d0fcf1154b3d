package order

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/stock"
)

// The answers every strategy gives a buyer whose Idempotency-Key already
// has an order: that order, replayed, or idempotency.ErrKeyReused if the key was used
// for another SKU or quantity.

// UserKey is one buyer's Idempotency-Key.
type UserKey struct{ User, Key string }

// ReplayOr answers a buyer with the order its key already has, if it has
// one, and otherwise with err: a refusal, which may only be because that
// order took the stock, or nil when the buyer has no answer yet. When the
// database cannot say, the buyer is busy, never refused: its order may
// exist.
func ReplayOr(ctx context.Context, gdb *gorm.DB, r PlaceRequest, err error) (Order, bool, error) {
	o, found, e := existing(ctx, gdb, r)
	switch {
	case found:
		return o, true, nil
	case errors.Is(e, idempotency.ErrKeyReused):
		return Order{}, false, e
	case e != nil:
		return Order{}, false, fmt.Errorf("%w: %w", stock.ErrBusy, e)
	default:
		return Order{}, false, err
	}
}

// existing returns the order that r's key already has, if any: found, or
// idempotency.ErrKeyReused if it is for other lines.
func existing(ctx context.Context, gdb *gorm.DB, r PlaceRequest) (o Order, found bool, err error) {
	err = gdb.WithContext(ctx).Where("user_id = ? AND idempotency_key = ?", r.UserID, r.IdempotencyKey).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("order: place: %w", err)
	}
	orders := []Order{o}
	if err := withItems(ctx, gdb, orders); err != nil {
		return Order{}, false, err
	}
	if o = orders[0]; !o.asks(r) {
		return Order{}, false, keyReused(o.ID)
	}
	return o, true, nil
}

// checkCartRefusal answers a cart refused with err: a retry whose first
// request placed the cart finds the stock taken by its own order, and gets
// that order again.
func (s *Service) checkCartRefusal(ctx context.Context, r PlaceRequest, err error) (Order, bool, error) {
	if r.IdempotencyKey == "" || !(errors.Is(err, stock.ErrSoldOut) || errors.Is(err, ErrLimitReached)) {
		return Order{}, false, err
	}
	return ReplayOr(ctx, s.db, r, err)
}

// Replay answers r, whose key already has order o.
func Replay(o Order, r PlaceRequest) Answer {
	if !o.asks(r) {
		return Answer{Err: keyReused(o.ID)}
	}
	return Answer{Order: o, Replayed: true}
}

// SameKey answers a repeat of a key from the first buyer's answer: a
// replay of its order, or idempotency.ErrKeyReused if the request differs.
func SameKey(first Answer, r PlaceRequest) Answer {
	if first.Err != nil {
		return Answer{Err: first.Err}
	}
	return Replay(first.Order, r)
}
