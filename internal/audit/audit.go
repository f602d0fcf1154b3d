// Package audit reads the shop's invariants from the database: stock
// conserved (every unit explained by the SKU's movements and orders),
// never negative, not oversold, not undersold, no duplicate
// order for one Idempotency-Key, a row for every acknowledged order and
// for every line of an acknowledged cart, no partial order (rows of one
// order in different statuses), and with a payment window no order both
// paid and given back, one payment per paid order, and no orphaned
// payment but on a cancelled order or beside the payment that paid it.
// Every figure comes from the database, never from what a client counted.
//
// An order is one row of orders per line: a cart's first line, of its
// lowest SKU, is its head row, whose id is the order's, and every other
// line's row has cart_id set to it. The order of a row is therefore
// COALESCE(cart_id, id). The audit is per SKU, over the rows of that SKU;
// a SKU's units by status are one query:
//
//	SELECT status, SUM(quantity) FROM orders WHERE sku = ? GROUP BY status
package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// Audit is what the database says about one SKU after a run. Every figure
// is read from stock_items, stock_movements and orders, never from client
// counters.
type Audit struct {
	SKU       string `json:"sku"`
	Initial   int    `json:"initial"`
	Available int    `json:"available"`
	// Received is the sum of the SKU's movements: its initial stock,
	// restocks, corrections (stock_movements).
	Received int `json:"received"`
	Orders   int `json:"orders"`  // live orders (created, pending or paid) with a line of the SKU
	Sold     int `json:"sold"`    // units of live orders
	Pending  int `json:"pending"` // units of pending orders, held until paid or cancelled
	// Oversold is the units sold beyond what the SKU received.
	Oversold int `json:"oversold"`
	// Undersold is the stock left over although buyers were turned away as
	// sold out.
	Undersold int `json:"undersold"`
	// Drift is available + sold - received: zero when every unit is
	// explained.
	Drift int `json:"drift"`
	// Duplicates counts orders beyond the first per (user, idempotency key).
	Duplicates int `json:"duplicates"`
	// LostAcks counts orders of one line that the client was told were
	// created (201) but that have no row.
	LostAcks int `json:"lost_acks"`
	// Partial counts orders with a line of the SKU whose rows differ in
	// status (part of the order paid, cancelled or refunded without the
	// rest), or are not as many as the head's line_count (a line taken
	// without the others).
	Partial int `json:"partial"`
	// MissingLines counts acknowledged carts with a line of the SKU that
	// has no row: the order was taken without that line's unit.
	MissingLines int `json:"missing_lines"`
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
	add(a.Oversold > 0, "oversold %d units: %d sold of %d received", a.Oversold, a.Sold, a.Received)
	add(a.Undersold > 0, "undersold %d units: buyers turned away with stock left", a.Undersold)
	add(a.Drift != 0, "stock not conserved: available %d + sold %d != received %d", a.Available, a.Sold, a.Received)
	add(a.Available < 0, "available is negative: %d", a.Available)
	add(a.Duplicates > 0, "%d duplicate orders for one idempotency key", a.Duplicates)
	add(a.LostAcks > 0, "%d acknowledged orders have no row", a.LostAcks)
	add(a.Partial > 0, "%d partial orders: their rows differ in status, or a line has no row", a.Partial)
	add(a.MissingLines > 0, "%d acknowledged carts have no row for their line of %s: partial orders", a.MissingLines, a.SKU)
	add(a.PaidAndReturned > 0, "%d orders both paid and cancelled, their stock returned", a.PaidAndReturned)
	add(a.BadPayments > 0, "%d paid orders without exactly one payment", a.BadPayments)
	add(a.StrayOrphans > 0, "%d orphaned payments on orders neither cancelled nor paid by another payment", a.StrayOrphans)
	return v
}

// Acked is an order a client was answered 201 for: its id, which is its
// head row's, and the SKUs of its lines.
type Acked struct {
	ID   int64
	SKUs []string
}

// liveStatuses are the statuses of the orders that hold their units.
var liveStatuses = []string{"created", "pending", "paid"}

// SKU reads sku's stock and orders. soldOut is how many buyers were told
// the SKU was sold out; acked holds the ids of the orders of sku, each of
// one line, that the clients were sent a 201 for. SKUs audits carts.
func SKU(ctx context.Context, db *gorm.DB, sku string, soldOut int, acked []int64) (Audit, error) {
	line := []string{sku}
	orders := make([]Acked, len(acked))
	for i, id := range acked {
		orders[i] = Acked{ID: id, SKUs: line}
	}
	_, each, err := SKUs(ctx, db, line, map[string]int{sku: soldOut}, orders)
	if err != nil {
		return Audit{}, err
	}
	return each[0], nil
}

// SKUs reads each of skus as SKU does, and what they come to together.
// soldOut counts by SKU the buyers told that it was sold out; acked holds
// the orders the clients were sent a 201 for, of one line or more, of
// skus: every line of each must have its row. total sums the SKUs'
// figures, but for Orders and Partial, which count an order once however
// many lines of skus it holds; with one SKU it is that SKU's audit.
func SKUs(ctx context.Context, db *gorm.DB, skus []string, soldOut map[string]int, acked []Acked) (total Audit, each []Audit, err error) {
	r := newReader(ctx, db)
	for _, sku := range skus {
		a, err := r.sku(sku, soldOut[sku], acked)
		if err != nil {
			return Audit{}, nil, err
		}
		each = append(each, a)
	}
	if len(each) == 1 {
		return each[0], each, nil
	}
	total = Total(each)
	if total.Orders, total.Partial, err = r.orders(skus); err != nil {
		return Audit{}, nil, err
	}
	return total, each, nil
}

// Total sums the audits of several SKUs, named together, but for Orders
// and Partial, which must count an order once however many of the SKUs
// it holds: they are left zero, for the caller.
func Total(each []Audit) Audit {
	var total Audit
	var skus []string
	for _, a := range each {
		skus = append(skus, a.SKU)
		total.Initial += a.Initial
		total.Available += a.Available
		total.Received += a.Received
		total.Sold += a.Sold
		total.Pending += a.Pending
		total.Oversold += a.Oversold
		total.Undersold += a.Undersold
		total.Drift += a.Drift
		total.Duplicates += a.Duplicates
		total.LostAcks += a.LostAcks
		total.MissingLines += a.MissingLines
		total.PaidAndReturned += a.PaidAndReturned
		total.BadPayments += a.BadPayments
		total.StrayOrphans += a.StrayOrphans
	}
	total.SKU = strings.Join(skus, ",")
	return total
}

// reader runs the audit's queries in one context.
type reader struct{ db *gorm.DB }

func newReader(ctx context.Context, db *gorm.DB) reader { return reader{db: db.WithContext(ctx)} }

func (r reader) row(query string, args ...any) *sql.Row { return r.db.Raw(query, args...).Row() }

// sku reads one SKU's audit.
func (r reader) sku(sku string, soldOut int, acked []Acked) (Audit, error) {
	a := Audit{SKU: sku}
	err := r.row(`SELECT initial, available, (SELECT COALESCE(SUM(delta), 0) FROM stock_movements WHERE sku = ?)
		FROM stock_items WHERE sku = ?`, sku, sku).Scan(&a.Initial, &a.Available, &a.Received)
	if errors.Is(err, sql.ErrNoRows) {
		return Audit{}, fmt.Errorf("audit: SKU %q does not exist", sku)
	}
	if err != nil {
		return Audit{}, fmt.Errorf("audit: stock of %s: %w", sku, err)
	}
	if err := r.units(sku, &a); err != nil {
		return Audit{}, err
	}
	if a.Orders, a.Partial, err = r.orders([]string{sku}); err != nil {
		return Audit{}, err
	}
	if err := payments(r.db, sku, &a); err != nil {
		return Audit{}, err
	}
	err = r.row(`SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM orders
		WHERE sku = ? AND idempotency_key IS NOT NULL GROUP BY user_id, idempotency_key) AS g`, sku).Scan(&a.Duplicates)
	if err != nil {
		return Audit{}, fmt.Errorf("audit: duplicates of %s: %w", sku, err)
	}
	if err := r.acked(sku, acked, &a); err != nil {
		return Audit{}, err
	}
	a.Oversold = max(0, a.Sold-a.Received)
	if soldOut > 0 {
		a.Undersold = max(0, a.Available)
	}
	a.Drift = a.Available + a.Sold - a.Received
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

// units reads sku's units by status: Sold, those of live orders, and
// Pending.
func (r reader) units(sku string, a *Audit) error {
	units, err := Units(r.db, sku)
	for _, status := range liveStatuses {
		a.Sold += units[status]
	}
	a.Pending = units["pending"]
	return err
}

// Units reads sku's units by status, in orders of every line, with the
// one query
//
//	SELECT status, SUM(quantity) FROM orders WHERE sku = ? GROUP BY status
func Units(db *gorm.DB, sku string) (map[string]int, error) {
	rows, err := db.Raw(`SELECT status, SUM(quantity) FROM orders WHERE sku = ? GROUP BY status`, sku).Rows()
	if err != nil {
		return nil, fmt.Errorf("audit: units of %s: %w", sku, err)
	}
	defer rows.Close()
	units := make(map[string]int)
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("audit: units of %s: %w", sku, err)
		}
		units[status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: units of %s: %w", sku, err)
	}
	return units, nil
}

// orders counts the live orders with a line of skus, and the partial ones
// among every order with a line of skus: those whose rows differ in
// status, or are fewer or more than the head's line_count.
// An order counts once, however many lines of skus it holds.
func (r reader) orders(skus []string) (live, partial int, err error) {
	err = r.row(`SELECT COUNT(DISTINCT COALESCE(cart_id, id)) FROM orders WHERE sku IN ? AND status IN ?`, skus, liveStatuses).Scan(&live)
	if err != nil {
		return 0, 0, fmt.Errorf("audit: orders of %s: %w", strings.Join(skus, ","), err)
	}
	err = r.row(`SELECT COUNT(*) FROM (SELECT COALESCE(cart_id, id) AS o FROM orders
		WHERE COALESCE(cart_id, id) IN (SELECT COALESCE(cart_id, id) FROM orders WHERE sku IN ?)
		GROUP BY COALESCE(cart_id, id) HAVING COUNT(DISTINCT status) > 1 OR SUM(line_count) <> COUNT(*)) AS p`, skus).Scan(&partial)
	if err != nil {
		return 0, 0, fmt.Errorf("audit: partial orders of %s: %w", strings.Join(skus, ","), err)
	}
	return live, partial, nil
}

// acked counts the acknowledged orders with a line of sku that has no
// row: in LostAcks those of one line, in MissingLines the carts. A line's
// row is the head (id = the order's id, cart_id NULL) or a row with
// cart_id = the order's id, of sku either way.
func (r reader) acked(sku string, acked []Acked, a *Audit) error {
	holds := func(o Acked) bool { return slices.Contains(o.SKUs, sku) }
	if !slices.ContainsFunc(acked, holds) {
		return nil
	}
	rows, err := r.db.Raw(`SELECT COALESCE(cart_id, id) FROM orders WHERE sku = ?`, sku).Rows()
	if err != nil {
		return fmt.Errorf("audit: acknowledged orders of %s: %w", sku, err)
	}
	defer rows.Close()
	found := make(map[int64]bool)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("audit: acknowledged orders of %s: %w", sku, err)
		}
		found[id] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit: acknowledged orders of %s: %w", sku, err)
	}
	for _, o := range acked {
		if !holds(o) || found[o.ID] {
			continue
		}
		found[o.ID] = true // counted once
		if len(o.SKUs) > 1 {
			a.MissingLines++
		} else {
			a.LostAcks++
		}
	}
	return nil
}
