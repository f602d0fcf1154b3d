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
// remains.
type Optimistic struct{ db *gorm.DB }

// NewOptimistic returns the optimistic strategy.
func NewOptimistic(gdb *gorm.DB) *Optimistic { return &Optimistic{db: gdb} }

// errConflict means another buyer changed the row since it was read.
var errConflict = fmt.Errorf("stock: version conflict")

// Adjust implements the strategy.
func (s *Optimistic) Adjust(ctx context.Context, sku string, delta int, fn Fn) error {
	for attempt := 0; ; attempt++ {
		// A fresh read each attempt: inside one REPEATABLE READ transaction
		// a re-read would return the same stale snapshot.
		it, err := Get(ctx, s.db, sku)
		if err != nil {
			return busyIfDone(ctx, err)
		}
		if it.Available+delta < 0 {
			return fmt.Errorf("%w: %s", ErrSoldOut, sku)
		}
		err = transact(ctx, s.db, func(tx *gorm.DB) error {
			res := tx.Exec(`UPDATE stock_items SET available = ?, version = version + 1, updated_at = ?
				WHERE sku = ? AND version = ?`, it.Available+delta, now(), sku, it.Version)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return errConflict
			}
			return fn(tx)
		})
		if err != errConflict {
			return err
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}
