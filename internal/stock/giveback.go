package stock

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"
)

// givingBack reports whether every line returns units: an expiry, a
// cancel or a refund.
func givingBack(lines []Line) bool {
	return len(lines) > 0 && !slices.ContainsFunc(lines, func(l Line) bool { return l.Delta <= 0 })
}

// giveBack returns the lines' units (every delta > 0), in ascending SKU
// order, and runs fn, in one transaction, without any lock on the SKUs:
// a give-back never waits behind the buyers who want its units. Adding
// cannot oversell, so it needs no lock; it waits only for the row, while
// one transaction holds it. It counts itself in given_back, and a lock
// holder's write, which sets available from its read, is conditional on
// given_back being what it read (as well as on its fencing token), so that
// it never overwrites units given back after its read: it reads again.
// A paused holder's stale write is still refused by the fence.
func giveBack(ctx context.Context, gdb *gorm.DB, lines []Line, fn Fn) error {
	lines = Sorted(lines)
	return Transact(ctx, gdb, func(tx *gorm.DB) error {
		for _, l := range lines {
			res := tx.Exec(`UPDATE stock_items SET available = available + ?, given_back = given_back + 1,
				version = version + 1, updated_at = ? WHERE sku = ?`, l.Delta, now(), l.SKU)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return fmt.Errorf("%w: %s", ErrNotFound, l.SKU)
			}
		}
		if err := awaitLeases(tx, lines); err != nil {
			return err
		}
		return fn(Tx{tx})
	})
}
