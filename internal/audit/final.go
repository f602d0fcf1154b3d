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
	before := now()
	dbNow, err := db.Now(r.db)
	if err != nil {
		return final, fmt.Errorf("audit: the database's clock: %w", err)
	}
	offset := dbNow.UnixNano() - (before+now())/2
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
				o.Deadline = row.ExpiresAt.UnixNano() - offset
			}
			if row.CancelledAt != nil && row.CancelKey == nil && row.Status == "cancelled" {
				o.Expired = row.CancelledAt.UnixNano() - offset
			}
			final.Orders = append(final.Orders, o)
			n++
		}
		final.Orders[n-1].Items = append(final.Orders[n-1].Items, history.Item{SKU: row.SKU, Quantity: row.Quantity})
	}
	slices.SortFunc(final.Orders, func(a, b history.FinalOrder) int { return cmp.Compare(a.ID, b.ID) })
	return final, nil
}
