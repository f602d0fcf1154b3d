// Package audit reads the shop's invariants from the database: stock
// conserved, never negative, not oversold, not undersold, no duplicate
// order for one Idempotency-Key, and a row for every acknowledged order.
// Every figure comes from stock_items and orders, never from what a client
// counted.
package audit

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"
)

// Audit is what the database says about one SKU after a run. Every figure
// is read from stock_items and orders, never from client counters.
type Audit struct {
	SKU       string `json:"sku"`
	Initial   int    `json:"initial"`
	Available int    `json:"available"`
	Orders    int    `json:"orders"` // live orders
	Sold      int    `json:"sold"`   // units of live orders
	// Oversold is the units sold beyond the initial stock.
	Oversold int `json:"oversold"`
	// Undersold is the stock left over although buyers were turned away as
	// sold out.
	Undersold int `json:"undersold"`
	// Drift is available + sold - initial: zero when stock is conserved.
	Drift int `json:"drift"`
	// Duplicates counts orders beyond the first per (user, idempotency key).
	Duplicates int `json:"duplicates"`
	// LostAcks counts orders the client was told were created (201) but
	// that have no row.
	LostAcks int `json:"lost_acks"`
}

// Violations lists the invariants the audit shows broken; none means the
// run was correct.
func (a Audit) Violations() []string {
	var v []string
	add := func(broken bool, format string, args ...any) {
		if broken {
			v = append(v, fmt.Sprintf(format, args...))
		}
	}
	add(a.Oversold > 0, "oversold %d units: %d sold of %d", a.Oversold, a.Sold, a.Initial)
	add(a.Undersold > 0, "undersold %d units: buyers turned away with stock left", a.Undersold)
	add(a.Drift != 0, "stock not conserved: available %d + sold %d != initial %d", a.Available, a.Sold, a.Initial)
	add(a.Available < 0, "available is negative: %d", a.Available)
	add(a.Duplicates > 0, "%d duplicate orders for one idempotency key", a.Duplicates)
	add(a.LostAcks > 0, "%d acknowledged orders have no row", a.LostAcks)
	return v
}

// SKU reads sku's stock and orders. soldOut is how many buyers were
// told the SKU was sold out; acked holds the ids of the orders the clients
// were sent a 201 for.
func SKU(ctx context.Context, db *gorm.DB, sku string, soldOut int, acked []int64) (Audit, error) {
	a := Audit{SKU: sku}
	db = db.WithContext(ctx)
	err := db.Raw(`SELECT initial, available FROM stock_items WHERE sku = ?`, sku).Row().Scan(&a.Initial, &a.Available)
	if err != nil {
		return Audit{}, fmt.Errorf("audit: stock of %s: %w", sku, err)
	}
	err = db.Raw(`SELECT COUNT(*), COALESCE(SUM(quantity), 0) FROM orders WHERE sku = ? AND status = 'created'`, sku).
		Row().Scan(&a.Orders, &a.Sold)
	if err != nil {
		return Audit{}, fmt.Errorf("audit: orders of %s: %w", sku, err)
	}
	err = db.Raw(`SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM orders
		WHERE sku = ? AND idempotency_key IS NOT NULL GROUP BY user_id, idempotency_key) AS g`, sku).Row().Scan(&a.Duplicates)
	if err != nil {
		return Audit{}, fmt.Errorf("audit: duplicates of %s: %w", sku, err)
	}
	a.LostAcks, err = missingOrders(ctx, db, acked)
	if err != nil {
		return Audit{}, err
	}
	a.Oversold = max(0, a.Sold-a.Initial)
	if soldOut > 0 {
		a.Undersold = max(0, a.Available)
	}
	a.Drift = a.Available + a.Sold - a.Initial
	return a, nil
}

// missingOrders counts the distinct ids in acked that have no order row.
func missingOrders(ctx context.Context, db *gorm.DB, acked []int64) (int, error) {
	const batch = 1000
	acked = slices.Compact(slices.Sorted(slices.Values(acked)))
	missing := 0
	for len(acked) > 0 {
		n := min(batch, len(acked))
		var found int
		if err := db.WithContext(ctx).Raw(`SELECT COUNT(*) FROM orders WHERE id IN ?`, acked[:n]).Row().Scan(&found); err != nil {
			return 0, fmt.Errorf("audit: acknowledged orders: %w", err)
		}
		missing += n - found
		acked = acked[n:]
	}
	return missing, nil
}
