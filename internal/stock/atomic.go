package stock

import (
	"context"

	"gorm.io/gorm"
)

// Atomic guards stock with one conditional UPDATE: the database checks and
// changes the row under its own row lock, so no read can go stale.
type Atomic struct{ db *gorm.DB }

// NewAtomic returns the atomic strategy.
func NewAtomic(gdb *gorm.DB) *Atomic { return &Atomic{db: gdb} }

// Adjust implements the strategy.
func (s *Atomic) Adjust(ctx context.Context, sku string, delta int, fn Fn) error {
	return transact(ctx, s.db, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE stock_items SET available = available + ?, version = version + 1, updated_at = ?
			WHERE sku = ? AND available + ? >= 0`, delta, now(), sku, delta)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return missing(ctx, tx, sku)
		}
		return fn(tx)
	})
}
