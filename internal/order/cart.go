package order

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/stock"
)

// Carts: an order of several SKUs. Each line is a row of orders, with its
// SKU, quantity and status, so that a SKU's units by status stay one query
// on orders. The first line's row (the lowest SKU) is the head: its id is
// the order's, it carries the Idempotency-Key and counts the lines
// (line_count); every other line's row points to it (cart_id). All the
// rows are inserted in one transaction, with the stock of every line, and
// every transition moves them all in one transaction: the head by its
// primary key, then the other lines (move). See docs/orders.md#carts.

// MaxLines is the most lines a cart may have.
const MaxLines = 20

// Line is one line of an order: a SKU and how many units of it.
type Line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// lines returns r's lines: its cart's, or its one SKU's.
func (r PlaceRequest) lines() []Line {
	if len(r.Items) > 0 {
		return r.Items
	}
	return []Line{{SKU: r.SKU, Quantity: r.Quantity}}
}

// normal returns r with a cart of one line as a single-SKU request, and a
// cart's lines in ascending SKU order, the order in which every strategy
// takes them. It refuses a cart whose SKUs are not distinct.
func (r PlaceRequest) normal() (PlaceRequest, error) {
	switch len(r.Items) {
	case 0:
		return r, nil
	case 1:
		r.SKU, r.Quantity, r.Items = r.Items[0].SKU, r.Items[0].Quantity, nil
		return r, nil
	}
	if len(r.Items) > MaxLines {
		return r, fmt.Errorf("order: a cart has at most %d lines, not %d", MaxLines, len(r.Items))
	}
	items := slices.Clone(r.Items)
	slices.SortFunc(items, func(a, b Line) int { return cmp.Compare(a.SKU, b.SKU) })
	for i := 1; i < len(items); i++ {
		if items[i].SKU == items[i-1].SKU {
			return r, fmt.Errorf("order: sku %s is in the cart twice", items[i].SKU)
		}
	}
	r.SKU, r.Quantity, r.Items = "", 0, items
	return r, nil
}

// isCart reports whether r buys more than one SKU.
func (r PlaceRequest) isCart() bool { return len(r.Items) > 1 }

// what is r as its kept answers name it: its SKUs and their quantities,
// each newline-separated for a cart. No SKU holds a newline.
func (r PlaceRequest) what() (skus, quantities string) {
	if !r.isCart() {
		return r.SKU, strconv.Itoa(r.Quantity)
	}
	s := make([]string, len(r.Items))
	q := make([]string, len(r.Items))
	for i, l := range r.Items {
		s[i], q[i] = l.SKU, strconv.Itoa(l.Quantity)
	}
	return strings.Join(s, "\n"), strings.Join(q, "\n")
}

// asks reports whether o is the order r asks for: the same lines.
func (o Order) asks(r PlaceRequest) bool {
	return slices.Equal(o.lines(), r.lines())
}

// lines returns o's lines: its cart's, or its one SKU's.
func (o Order) lines() []Line {
	if len(o.Items) > 0 {
		return o.Items
	}
	return []Line{{SKU: o.SKU, Quantity: o.Quantity}}
}

// Returns is the change of stock that gives o's units back, a line per
// SKU.
func (o Order) Returns() []stock.Line { return stockLines(o.lines(), 1) }

// stockLines returns lines as the strategy takes them, each by sign times
// its quantity.
func stockLines(lines []Line, sign int) []stock.Line {
	s := make([]stock.Line, len(lines))
	for i, l := range lines {
		s[i] = stock.Line{SKU: l.SKU, Delta: sign * l.Quantity}
	}
	return s
}

// MarshalJSON shows an order as the API does: items always lists its
// lines; sku and quantity are there only when it has one.
func (o Order) MarshalJSON() ([]byte, error) {
	type plain Order
	p := plain(o)
	if len(o.Items) > 1 {
		p.SKU, p.Quantity = "", 0
	} else {
		p.Items = []Line{{SKU: o.SKU, Quantity: o.Quantity}}
	}
	return json.Marshal(p)
}

// newOrder is the head row of r's order, not yet inserted.
func newOrder(r PlaceRequest) Order {
	lines := r.lines()
	o := Order{SKU: lines[0].SKU, UserID: r.UserID, Quantity: lines[0].Quantity, Status: StatusCreated,
		CreatedAt: Now(), LineCount: len(lines)}
	if r.isCart() {
		o.Items = lines
	}
	if r.IdempotencyKey != "" {
		o.IdempotencyKey = &r.IdempotencyKey
	}
	return o
}

// insert inserts o: its head row, and a cart's other lines, each a row
// that points to the head, with one INSERT written here.
func (o *Order) insert(tx *gorm.DB) error {
	o.ID = 0 // a transaction run again inserts afresh
	if err := tx.Create(o).Error; err != nil {
		return err
	}
	if len(o.Items) < 2 {
		return nil
	}
	const insert = `INSERT INTO orders (sku, user_id, quantity, status, created_at, expires_at, cart_id, line_count) VALUES `
	var q strings.Builder
	q.WriteString(insert)
	args := make([]any, 0, 7*(len(o.Items)-1))
	for i, l := range o.Items[1:] {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, 0)")
		args = append(args, l.SKU, o.UserID, l.Quantity, o.Status, o.CreatedAt, o.ExpiresAt, o.ID)
	}
	return tx.Exec(q.String(), args...).Error
}

// move makes updates on the rows of order o, in tx: its head row, by its
// primary key, where it matches where, and then a cart's other lines,
// which always move with it. It reports whether the head matched.
func move(tx *gorm.DB, o Order, where func(*gorm.DB) *gorm.DB, updates map[string]any) (bool, error) {
	res := where(tx.Model(&Order{}).Where("id = ? AND cart_id IS NULL", o.ID)).Updates(updates)
	if res.Error != nil || res.RowsAffected == 0 || o.LineCount < 2 {
		return res.RowsAffected > 0, res.Error
	}
	res = tx.Model(&Order{}).Where("cart_id = ?", o.ID).Updates(updates)
	if res.Error == nil && res.RowsAffected != int64(o.LineCount-1) {
		return false, fmt.Errorf("%w: order %d: %d of its %d other lines moved", errPartial, o.ID, res.RowsAffected, o.LineCount-1)
	}
	return true, res.Error
}

// withItems reads the lines of the carts among orders.
func withItems(ctx context.Context, gdb *gorm.DB, orders []Order) error {
	var carts []int64
	for _, o := range orders {
		if o.LineCount > 1 && len(o.Items) == 0 {
			carts = append(carts, o.ID)
		}
	}
	if len(carts) == 0 {
		return nil
	}
	var rows []struct {
		CartID   int64
		SKU      string `gorm:"column:sku"`
		Quantity int
	}
	err := gdb.WithContext(ctx).Raw(`SELECT cart_id, sku, quantity FROM orders WHERE cart_id IN ? ORDER BY cart_id, sku`, carts).Scan(&rows).Error
	if err != nil {
		return fmt.Errorf("order: lines: %w", err)
	}
	byCart := make(map[int64][]Line, len(carts))
	for _, r := range rows {
		byCart[r.CartID] = append(byCart[r.CartID], Line{SKU: r.SKU, Quantity: r.Quantity})
	}
	for i := range orders {
		o := &orders[i]
		if rest, ok := byCart[o.ID]; ok {
			o.Items = append([]Line{{SKU: o.SKU, Quantity: o.Quantity}}, rest...)
		}
	}
	return nil
}

// holdLines adds each line's units to what the user holds of its SKU,
// and refuses the order if any passes the limit.
func (s *Service) holdLines(tx *gorm.DB, userID string, lines []Line) error {
	for _, l := range lines {
		if err := s.hold(tx, userID, l.SKU, l.Quantity); err != nil {
			return err
		}
	}
	return nil
}

// errPartial means an order's rows were found in different statuses:
// never written by the shop, which moves them in one UPDATE.
var errPartial = errors.New("order: the rows of one order are in different statuses")
