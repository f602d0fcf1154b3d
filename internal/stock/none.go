package stock

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// None reads the stock, checks it, and writes back what it computed, with
// nothing to stop another buyer from doing the same in between. Two buyers
// who read 1 both write 0 and both get an order: this is the oversell the
// other strategies prevent. It exists to be measured, never to be used.
type None struct{ db *gorm.DB }

// NewNone returns the unprotected strategy.
func NewNone(gdb *gorm.DB) *None { return &None{db: gdb} }

// Adjust implements the strategy.
func (s *None) Adjust(ctx context.Context, sku string, delta int, fn Fn) error {
	it, err := Get(ctx, s.db, sku)
	if err != nil {
		return err
	}
	if it.Available+delta < 0 {
		return fmt.Errorf("%w: %s", ErrSoldOut, sku)
	}
	return transact(ctx, s.db, func(tx *gorm.DB) error {
		err := tx.Exec(`UPDATE stock_items SET available = ?, version = version + 1, updated_at = ? WHERE sku = ?`,
			it.Available+delta, now(), sku).Error
		if err != nil {
			return err
		}
		return fn(tx)
	})
}
