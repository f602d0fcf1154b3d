// Package audit reads the shop's invariants from the database: stock
// conserved, never negative, not oversold, not undersold, no duplicate
// order for one Idempotency-Key, a row for every acknowledged order, and
// with a payment window no order both paid and given back, one payment per
// paid order, and no orphaned payment but on a cancelled order or beside
// the payment that paid it. Every figure comes from the database, never
// from what a client counted.
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
	Orders    int    `json:"orders"`  // live orders: created, pending or paid
	Sold      int    `json:"sold"`    // units of live orders
	Pending   int    `json:"pending"` // units of pending orders, held until paid or cancelled
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
	// PaidAndReturned counts orders that were paid and cancelled both: their
	// stock came back although they were paid.
	PaidAndReturned int `json:"paid_and_returned"`
	// BadPayments counts paid orders without exactly one payment that paid
	// them.
	BadPayments int `json:"bad_payments"`
	// StrayOrphans counts orphaned payments on an order that was neither
	// cancelled nor paid by another payment: money kept for nothing.
	StrayOrphans int `json:"stray_orphans"`
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
	add(a.PaidAndReturned > 0, "%d orders both paid and cancelled, their stock returned", a.PaidAndReturned)
	add(a.BadPayments > 0, "%d paid orders without exactly one payment", a.BadPayments)
	add(a.StrayOrphans > 0, "%d orphaned payments on orders neither cancelled nor paid by another payment", a.StrayOrphans)
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
	err = db.Raw(`SELECT COUNT(*), COALESCE(SUM(quantity), 0), COALESCE(SUM(CASE WHEN status = 'pending' THEN quantity ELSE 0 END), 0)
		FROM orders WHERE sku = ? AND status IN ('created', 'pending', 'paid')`, sku).Row().Scan(&a.Orders, &a.Sold, &a.Pending)
	if err != nil {
		return Audit{}, fmt.Errorf("audit: orders of %s: %w", sku, err)
	}
	if err := payments(db, sku, &a); err != nil {
		return Audit{}, err
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

// payments reads the payment invariants of sku's orders. A cart's line is
// paid by its order's payment, made to the head row's id (cart_id).
func payments(db *gorm.DB, sku string, a *Audit) error {
	err := db.Raw(`SELECT
		(SELECT COUNT(*) FROM orders o WHERE o.sku = ? AND o.cancelled_at IS NOT NULL
			AND (o.paid_at IS NOT NULL OR EXISTS (SELECT 1 FROM payments p WHERE p.order_id = COALESCE(o.cart_id, o.id) AND p.status = 'paid'))),
		(SELECT COUNT(*) FROM orders o WHERE o.sku = ? AND o.paid_at IS NOT NULL
			AND (SELECT COUNT(*) FROM payments p WHERE p.order_id = COALESCE(o.cart_id, o.id) AND p.status = 'paid') <> 1),
		(SELECT COUNT(*) FROM payments p JOIN orders o ON o.id = p.order_id WHERE o.sku = ? AND p.status = 'orphaned'
			AND NOT (o.status = 'cancelled' OR o.expires_at IS NULL OR (o.payment_id IS NOT NULL AND o.payment_id <> p.payment_id)))`,
		sku, sku, sku).Row().Scan(&a.PaidAndReturned, &a.BadPayments, &a.StrayOrphans)
	if err != nil {
		return fmt.Errorf("audit: payments of %s: %w", sku, err)
	}
	return nil
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
