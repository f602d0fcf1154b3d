package order

import (
	"context"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/tracing"
)

// A batch's orders go in with one INSERT of many rows, written here rather
// than by GORM, which reflects on every row: the INSERT is most of what a
// batch costs the shop per order.

// IDSource is how a batch learns its orders' ids.
type IDSource int

const (
	// idsReturned: the database returns them (INSERT … RETURNING: SQLite,
	// MariaDB 10.5 and later), in the rows' order.
	idsReturned IDSource = iota
	// idsCounted: one INSERT's rows get consecutive ids in every InnoDB
	// lock mode, counted up from LAST_INSERT_ID(), the first's, while the
	// server's auto_increment_increment is 1 (MySQL).
	idsCounted
	// idsRead: read back by key (readIDs).
	idsRead
)

// IDSourceOf asks the database how a batch learns its ids.
func IDSourceOf(tx *gorm.DB) IDSource {
	if slices.Contains(tx.Callback().Create().Clauses, "RETURNING") {
		return idsReturned
	}
	var step int
	if tx.Raw(`SELECT @@auto_increment_increment`).Row().Scan(&step) == nil && step == 1 {
		return idsCounted
	}
	return idsRead
}

const insertOrdersSQL = `INSERT INTO orders (sku, user_id, quantity, status, idempotency_key, created_at, expires_at) VALUES `

// InsertOrders inserts orders, all of one SKU, in one statement and sets
// their ids.
func InsertOrders(tx *gorm.DB, orders []Order, ids IDSource) (err error) {
	var q strings.Builder
	q.Grow(len(insertOrdersSQL) + 25*len(orders) + 13)
	q.WriteString(insertOrdersSQL)
	args := make([]any, 0, 7*len(orders))
	for i, o := range orders {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?)")
		args = append(args, o.SKU, o.UserID, o.Quantity, o.Status, *o.IdempotencyKey, o.CreatedAt, o.ExpiresAt)
	}
	ctx, span := tracing.Statement(tx.Statement.Context, tx.Dialector.Name(), "INSERT", "orders", len(orders))
	defer func() { tracing.End(span, err) }()
	return insertWithIDs(ctx, tx, q.String(), args, orders, ids, func() error { return readIDs(tx, orders[0].SKU, orders) })
}

// insertWithIDs runs q, a multi-row INSERT of the rows of orders in their
// order, and sets their ids as ids says; read reads them back by key,
// from the first one's up, where the database cannot say them (idsRead).
func insertWithIDs(ctx context.Context, tx *gorm.DB, q string, args []any, orders []Order, ids IDSource, read func() error) error {
	conn := tx.Statement.ConnPool
	if ids == idsReturned {
		rows, err := conn.QueryContext(ctx, q+" RETURNING id", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for i := 0; rows.Next() && i < len(orders); i++ {
			if err := rows.Scan(&orders[i].ID); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	res, err := conn.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	first, err := res.LastInsertId()
	if err != nil {
		return err
	}
	for i := range orders {
		orders[i].ID = first + int64(i)
	}
	if ids == idsRead {
		return read()
	}
	return nil
}

// readIDs sets the ids of the orders just inserted, read back by key: a
// multi-row INSERT's ids need not be consecutive, but none is below the
// first, and under the row lock no other order of this SKU is inserted.
func readIDs(tx *gorm.DB, sku string, granted []Order) error {
	var ids []Order
	if err := tx.Raw(`SELECT id, user_id, idempotency_key FROM orders WHERE sku = ? AND id >= ?`, sku, granted[0].ID).Scan(&ids).Error; err != nil {
		return err
	}
	setIDs(granted, ids)
	return nil
}

// setIDs sets each of orders' ids to that of the row in rows with its
// user and Idempotency-Key.
func setIDs(orders, rows []Order) {
	byKey := make(map[UserKey]int64, len(rows))
	for _, o := range rows {
		if o.IdempotencyKey != nil {
			byKey[UserKey{o.UserID, *o.IdempotencyKey}] = o.ID
		}
	}
	for i, o := range orders {
		orders[i].ID = byKey[UserKey{o.UserID, *o.IdempotencyKey}]
	}
}
