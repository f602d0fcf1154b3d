package stock

import (
	"context"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Pessimistic locks the row with SELECT … FOR UPDATE for the whole order
// transaction: buyers of one SKU queue on the row lock. A cart locks its
// rows in ascending SKU order, so two carts never lock two rows in
// opposite orders, which would deadlock (MySQL error 1213).
type Pessimistic struct{ db *gorm.DB }

// NewPessimistic returns the pessimistic strategy.
func NewPessimistic(gdb *gorm.DB) *Pessimistic { return &Pessimistic{db: gdb} }

// Adjust implements the strategy.
func (s *Pessimistic) Adjust(ctx context.Context, sku string, delta int, fn Fn) error {
	return s.AdjustLines(ctx, []Line{{SKU: sku, Delta: delta}}, fn)
}

// AdjustLines implements the strategy.
func (s *Pessimistic) AdjustLines(ctx context.Context, lines []Line, fn Fn) error {
	lines = Sorted(lines)
	return Transact(ctx, s.db, func(tx *gorm.DB) error {
		var sh short
		for _, l := range lines {
			it, err := Get(ctx, tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}), l.SKU)
			if err != nil {
				return err
			}
			if it.Available+l.Delta < 0 {
				sh = append(sh, l.SKU)
				continue
			}
			err = tx.Exec(`UPDATE stock_items SET available = ?, version = version + 1, updated_at = ? WHERE sku = ?`,
				it.Available+l.Delta, now(), l.SKU).Error
			if err != nil {
				return err
			}
		}
		if err := sh.err(); err != nil {
			return err
		}
		if err := awaitLeases(tx, lines); err != nil {
			return err
		}
		return fn(Tx{tx})
	})
}
