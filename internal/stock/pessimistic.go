package stock

import (
	"context"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Pessimistic locks the row with SELECT … FOR UPDATE for the whole order
// transaction: buyers of one SKU queue on the row lock.
type Pessimistic struct{ db *gorm.DB }

// NewPessimistic returns the pessimistic strategy.
func NewPessimistic(gdb *gorm.DB) *Pessimistic { return &Pessimistic{db: gdb} }

// Adjust implements the strategy.
func (s *Pessimistic) Adjust(ctx context.Context, sku string, delta int, fn Fn) error {
	return transact(ctx, s.db, func(tx *gorm.DB) error {
		it, err := Get(ctx, tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}), sku)
		if err != nil {
			return err
		}
		if it.Available+delta < 0 {
			return fmt.Errorf("%w: %s", ErrSoldOut, sku)
		}
		err = tx.Exec(`UPDATE stock_items SET available = ?, version = version + 1, updated_at = ? WHERE sku = ?`,
			it.Available+delta, now(), sku).Error
		if err != nil {
			return err
		}
		return fn(tx)
	})
}
