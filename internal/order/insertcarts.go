package order

import (
	"strings"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/tracing"
)

// A batch of carts goes in with two INSERTs, written here as a batch's
// orders are (insert.go): one of every cart's head row, and then, once the
// heads' ids are known, one of every cart's other lines, each pointing to
// its head (cart.go).

const insertHeadsSQL = `INSERT INTO orders (sku, user_id, quantity, status, idempotency_key, created_at, expires_at, line_count) VALUES `

// InsertCarts inserts carts, each with its Items (two lines or more) and
// an Idempotency-Key, and sets their ids.
func InsertCarts(tx *gorm.DB, carts []Order, ids IDSource) (err error) {
	ctx, span := tracing.Statement(tx.Statement.Context, tx.Dialector.Name(), "INSERT", "orders", len(carts))
	defer func() { tracing.End(span, err) }()
	var q strings.Builder
	q.WriteString(insertHeadsSQL)
	args := make([]any, 0, 8*len(carts))
	for i, o := range carts {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, o.SKU, o.UserID, o.Quantity, o.Status, *o.IdempotencyKey, o.CreatedAt, o.ExpiresAt, len(o.Items))
	}
	if err := insertWithIDs(ctx, tx, q.String(), args, carts, ids, func() error { return readHeadIDs(tx, carts) }); err != nil {
		return err
	}
	return insertLines(tx, carts)
}

// insertLines inserts the rows of the carts' lines but their first, whose
// row is the head, in one INSERT.
func insertLines(tx *gorm.DB, carts []Order) error {
	const insert = `INSERT INTO orders (sku, user_id, quantity, status, created_at, expires_at, cart_id, line_count) VALUES `
	var q strings.Builder
	q.WriteString(insert)
	args := make([]any, 0, 7*2*len(carts))
	n := 0
	for _, o := range carts {
		for _, l := range o.Items[1:] {
			if n > 0 {
				q.WriteString(", ")
			}
			n++
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, 0)")
			args = append(args, l.SKU, o.UserID, l.Quantity, o.Status, o.CreatedAt, o.ExpiresAt, o.ID)
		}
	}
	return tx.Exec(q.String(), args...).Error
}

// readHeadIDs sets the ids of the heads just inserted, read back by key:
// none is below the first one's, which carts[0].ID holds.
func readHeadIDs(tx *gorm.DB, carts []Order) error {
	users := make([]string, len(carts))
	for i, o := range carts {
		users[i] = o.UserID
	}
	var rows []Order
	if err := tx.Raw(`SELECT id, user_id, idempotency_key FROM orders WHERE id >= ? AND cart_id IS NULL AND user_id IN ?`, carts[0].ID, users).Scan(&rows).Error; err != nil {
		return err
	}
	setIDs(carts, rows)
	return nil
}
