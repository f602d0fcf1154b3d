package stock

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Optimistic reads the row with its version and writes only if the version
// is unchanged (compare-and-set). A buyer who loses the race reads again
// after a jittered pause; it stops only when it has bought, when the stock
// is truly short, or when ctx ends (ErrBusy). It never gives up while stock
// remains. A cart reads every line, and writes them all in one
// transaction, in ascending SKU order, each conditional on its own version:
// one changed version runs the whole cart again.
type Optimistic struct{ db *gorm.DB }

// NewOptimistic returns the optimistic strategy.
func NewOptimistic(gdb *gorm.DB) *Optimistic { return &Optimistic{db: gdb} }

// errConflict means another buyer changed the row since it was read.
var errConflict = fmt.Errorf("stock: version conflict")

// Adjust implements the strategy.
func (s *Optimistic) Adjust(ctx context.Context, sku string, delta int, fn Fn) error {
	return s.AdjustLines(ctx, []Line{{SKU: sku, Delta: delta}}, fn)
}

// AdjustLines implements the strategy.
func (s *Optimistic) AdjustLines(ctx context.Context, lines []Line, fn Fn) error {
	lines = Sorted(lines)
	for attempt := 0; ; attempt++ {
		// A fresh read each attempt: inside one REPEATABLE READ transaction
		// a re-read would return the same stale snapshot.
		items, sh, err := read(ctx, s.db, lines)
		if err != nil {
			return busyIfDone(ctx, err)
		}
		if err := sh.err(); err != nil {
			return err
		}
		err = Transact(ctx, s.db, func(tx *gorm.DB) error {
			for i, l := range lines {
				res := tx.Exec(`UPDATE stock_items SET available = ?, version = version + 1, updated_at = ?
					WHERE sku = ? AND version = ?`, items[i].Available+l.Delta, now(), l.SKU, items[i].Version)
				if res.Error != nil {
					return res.Error
				}
				if res.RowsAffected == 0 {
					return errConflict
				}
			}
			if err := awaitLeases(tx, lines); err != nil {
				return err
			}
			return fn(Tx{tx})
		})
		if err != errConflict {
			return err
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}
