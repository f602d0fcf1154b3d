package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/history"
)

// Final reads the final state of a sale of skus for its history: each
// SKU's available stock, and every order with a line of skus, with its
// payment deadline and when the shop cancelled it after that (a
// cancellation without a buyer's key), in the recording clock of now. The database's clock is read
// between two readings of now, and its stamps are moved by the difference.
func Final(ctx context.Context, gdb *gorm.DB, skus []string, now func() int64) (history.Final, error) {
	r := newReader(ctx, gdb)
	var final history.Final
	offset, err := clockOffset(r.db, now)
	if err != nil {
		return final, err
	}
	final.ClockError = offset.err
	for _, sku := range skus {
		s := history.Stock{SKU: sku}
		if err := r.row(`SELECT available FROM stock_items WHERE sku = ?`, sku).Scan(&s.Available); err != nil {
			return final, fmt.Errorf("audit: stock of %s: %w", sku, err)
		}
		final.Stock = append(final.Stock, s)
	}
	var rows []struct {
		ID, Order   int64
		SKU, UserID string
		Quantity    int
		Status      string
		Key         *string
		ExpiresAt   *time.Time
		CancelledAt *time.Time
		CancelKey   *string
	}
	err = r.db.Raw(`SELECT id, COALESCE(cart_id, id) AS `+"`order`"+`, sku, user_id, quantity, status,
		idempotency_key AS `+"`key`"+`, expires_at, cancelled_at, cancel_key FROM orders
		WHERE COALESCE(cart_id, id) IN (SELECT COALESCE(cart_id, id) FROM orders WHERE sku IN ?)
		ORDER BY COALESCE(cart_id, id), sku`, skus).Scan(&rows).Error
	if err != nil {
		return final, fmt.Errorf("audit: orders of the final state: %w", err)
	}
	for _, row := range rows {
		n := len(final.Orders)
		if n == 0 || final.Orders[n-1].ID != row.Order {
			o := history.FinalOrder{ID: row.Order, User: row.UserID, Status: row.Status, Window: row.ExpiresAt != nil}
			if row.Key != nil {
				o.Key = *row.Key
			}
			if row.ExpiresAt != nil {
				o.Deadline = row.ExpiresAt.UnixNano() - offset.ns
			}
			if row.CancelledAt != nil && row.CancelKey == nil && row.Status == "cancelled" {
				o.Expired = row.CancelledAt.UnixNano() - offset.ns
			}
			final.Orders = append(final.Orders, o)
			n++
		}
		final.Orders[n-1].Items = append(final.Orders[n-1].Items, history.Item{SKU: row.SKU, Quantity: row.Quantity})
	}
	slices.SortFunc(final.Orders, func(a, b history.FinalOrder) int { return cmp.Compare(a.ID, b.ID) })
	return final, nil
}

// offset is how far the database's clock is ahead of the recording
// clock, give or take err nanoseconds.
type offset struct{ ns, err int64 }

// clockOffset reads the database's clock between two readings of now, a
// few times, and keeps the reading of the shortest round trip: the
// database read its clock within it, so half of it bounds the error. A
// stamp of a millisecond (SQLite's) adds one.
func clockOffset(gdb *gorm.DB, now func() int64) (offset, error) {
	best := offset{err: -1}
	for range 5 {
		before := now()
		t, err := db.Now(gdb)
		if err != nil {
			return offset{}, fmt.Errorf("audit: the database's clock: %w", err)
		}
		after := now()
		if e := (after - before + 1) / 2; best.err < 0 || e < best.err {
			best = offset{ns: t.UnixNano() - (before+after)/2, err: e}
		}
	}
	if db.IsSQLite(gdb) {
		best.err += int64(time.Millisecond)
	}
	return best, nil
}
