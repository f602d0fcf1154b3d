package stock

import (
	"context"

	"gorm.io/gorm"
)

// Tx is the transaction in which a guard applies a change of stock and
// runs its caller's Fn, so that the caller's rows commit with the change
// or neither does. The stock row is the guard's: Tx offers no way to
// write it but the changes a caller makes on purpose (Set, Record), and
// reads what a caller needs under the row's lock (Epoch). The rows of
// other tables are their own packages' to write, through Rows: the
// orders, their events and the per-user hold are internal/order's.
type Tx struct{ db *gorm.DB }

// Fn is the caller's part of a stock transaction.
type Fn func(tx Tx) error

// Context is the transaction's ctx.
func (t Tx) Context() context.Context { return t.db.Statement.Context }

// Rows is the transaction, for the rows of the tables other packages
// keep; never for stock_items, whose statements are this package's.
func (t Tx) Rows() *gorm.DB { return t.db }

// Set sets sku's stock to available, as Set does.
func (t Tx) Set(sku string, available int, expected *int) (delta int, err error) {
	return Set(t.db, sku, available, expected)
}

// Epoch reads sku's sale epoch, as Epoch does.
func (t Tx) Epoch(sku string) (int64, error) { return Epoch(t.db, sku) }

// Record records a movement of stock, as Record does.
func (t Tx) Record(m Movement) error { return Record(t.db, m) }
