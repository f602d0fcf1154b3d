package stock

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
)

// Leases. In a flash sale nearly every buyer is refused, and an instance
// that knows why can say so without asking the database, for as long as
// the reason cannot go away. A lease is that promise, kept on the row
// that holds the reason, in a column that says until when, by the
// database's clock: sold_out_until on a SKU's row, while it has no unit
// available (SoldOutLease), and limit_until on a buyer's row of
// user_purchases, while the buyer holds the per-user limit
// (internal/order). An instance takes one with Grant, while its row says
// so, and answers from memory until a little before it ends
// (internal/order/leases.go). Every change that takes the reason away (a
// give-back of units, to the SKU or from what the buyer holds) locks the
// row first, so that no lease can be granted until it commits, and then
// waits in its transaction until the leases granted before it have ended
// (Await). What it changes is therefore never visible while an instance
// may still answer as if it were not. See
// docs/strategies.md#sold-out-leases.

// Lease is a kind of lease: the column of a table's rows that keeps it.
type Lease struct {
	Table, Column string
	What          string // what it answers, as an error names it
}

// SoldOutLease is the lease on a SKU's row while it has no unit.
var SoldOutLease = Lease{Table: "stock_items", Column: "sold_out_until", What: "sold-out"}

// Grant records the lease, in tx, on the one row that where selects (with
// the condition that the lease answers for), until d from now by the
// database's clock, and reports whether it did. tx's caller reads what the
// lease must know in the same transaction: until it commits, it holds the
// row, and nothing takes the reason away. SQLite serves one process, which
// takes none.
func (k Lease) Grant(tx *gorm.DB, d time.Duration, where string, args ...any) (bool, error) {
	if db.IsSQLite(tx) {
		return false, nil
	}
	res := tx.Exec(`UPDATE `+k.Table+` SET `+k.Column+` = GREATEST(COALESCE(`+k.Column+`, NOW(6)), NOW(6) + INTERVAL ? MICROSECOND)
		WHERE `+where, append([]any{d.Microseconds()}, args...)...)
	return res.RowsAffected == 1, res.Error
}

// Await locks, in tx, the rows that where selects, and waits until the
// leases on them have ended: what tx changes then becomes visible, when
// it commits, only once no instance can answer as the leases did. No
// lease can be granted meanwhile, since granting writes a row that tx
// holds. It waits at most until tx's ctx ends, and then fails, so that tx
// rolls back.
func (k Lease) Await(tx *gorm.DB, where string, args ...any) error {
	if db.IsSQLite(tx) {
		return nil
	}
	var left sql.NullInt64
	err := tx.Raw(`SELECT MAX(TIMESTAMPDIFF(MICROSECOND, NOW(6), `+k.Column+`)) FROM `+k.Table+`
		WHERE `+where+` FOR UPDATE`, args...).Row().Scan(&left)
	if err != nil || !left.Valid || left.Int64 <= 0 {
		return err
	}
	// A millisecond more for the rounding of the clocks' readings.
	return k.sleep(tx.Statement.Context, time.Duration(left.Int64)*time.Microsecond+time.Millisecond)
}

// GrantSoldOut records a sold-out lease on sku until d from now, if sku
// has no unit available, and reports whether it did (Lease.Grant).
func GrantSoldOut(tx *gorm.DB, sku string, d time.Duration) (bool, error) {
	return SoldOutLease.Grant(tx, d, `sku = ? AND available = 0`, sku)
}

// awaitLeases holds, in tx, the rows of the SKUs of lines that gain units,
// and waits until the sold-out leases on them have ended (Lease.Await).
func awaitLeases(tx *gorm.DB, lines []Line) error {
	var skus []string
	for _, l := range lines {
		if l.Delta > 0 {
			skus = append(skus, l.SKU)
		}
	}
	if len(skus) == 0 {
		return nil
	}
	return SoldOutLease.Await(tx, `sku IN ?`, skus)
}

// sleep waits d, or fails when ctx ends first.
func (k Lease) sleep(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the %s leases to end: %w", ErrBusy, k.What, ctx.Err())
	}
}
