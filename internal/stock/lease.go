package stock

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
)

// Sold-out leases. In a flash sale nearly every buyer is refused, and an
// instance that knows a SKU is sold out can say so without asking the
// database, for as long as no unit can come back. A lease is that
// promise, kept on the SKU's row: sold_out_until, on the database's
// clock. An instance takes one with GrantSoldOut while the row has none
// available, and answers sold out from memory until a little before it
// ends (internal/order/soldout.go). Every change that gives units back
// (a refund, a cancel, an expiry, a restock, a PUT of the stock) writes
// the row first, so that no lease can be granted until it commits, and
// then waits in its transaction until the leases granted before it have
// ended (awaitLeases). Its units are therefore never visible while an
// instance may still answer that there are none. See
// docs/strategies.md#sold-out-leases.

// GrantSoldOut records a sold-out lease on sku until d from now, by the
// database's clock, if sku has no unit available, and reports whether it
// did. It runs in tx, whose caller reads what the lease must know (the
// keys of the orders that took the units) in the same transaction: until
// it commits, it holds the row, and nothing gives units back.
func GrantSoldOut(tx *gorm.DB, sku string, d time.Duration) (bool, error) {
	if db.IsSQLite(tx) {
		return false, nil // one process: nothing to lease
	}
	res := tx.Exec(`UPDATE stock_items
		SET sold_out_until = GREATEST(COALESCE(sold_out_until, NOW(6)), NOW(6) + INTERVAL ? MICROSECOND)
		WHERE sku = ? AND available = 0`, d.Microseconds(), sku)
	return res.RowsAffected == 1, res.Error
}

// awaitLeases holds, in tx, the rows of the SKUs of lines that gain units,
// and waits until the sold-out leases on them have ended: the units tx
// gives back then become visible, when it commits, only once no instance
// can answer that the SKU has none. A lease cannot be granted meanwhile,
// since granting writes the row that tx holds. It waits at most until
// tx's ctx ends, and then fails, so that tx rolls back.
func awaitLeases(tx *gorm.DB, lines []Line) error {
	var skus []string
	for _, l := range lines {
		if l.Delta > 0 {
			skus = append(skus, l.SKU)
		}
	}
	if len(skus) == 0 || db.IsSQLite(tx) {
		return nil
	}
	var left sql.NullInt64
	err := tx.Raw(
		`SELECT MAX(TIMESTAMPDIFF(MICROSECOND, NOW(6), sold_out_until)) FROM stock_items
		WHERE sku IN ? AND sold_out_until > NOW(6) FOR UPDATE`, skus).Row().Scan(&left)
	if err != nil || !left.Valid {
		return err
	}
	// A millisecond more for the rounding of the clocks' readings.
	return sleep(tx.Statement.Context, time.Duration(left.Int64)*time.Microsecond+time.Millisecond)
}

// sleep waits d, or fails when ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the sold-out leases to end: %w", ErrBusy, ctx.Err())
	}
}
