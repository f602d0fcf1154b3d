package stock

import (
	"context"

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
	return s.AdjustLines(ctx, []Line{{SKU: sku, Delta: delta}}, fn)
}

// AdjustLines implements the strategy: every line is read first, then
// written back as computed, each a lost update waiting to happen.
func (s *None) AdjustLines(ctx context.Context, lines []Line, fn Fn) error {
	lines = Sorted(lines)
	items, sh, err := read(ctx, s.db, lines)
	if err != nil {
		return err
	}
	if err := sh.err(); err != nil {
		return err
	}
	return Transact(ctx, s.db, func(tx *gorm.DB) error {
		for i, l := range lines {
			err := tx.Exec(`UPDATE stock_items SET available = ?, version = version + 1, updated_at = ? WHERE sku = ?`,
				items[i].Available+l.Delta, now(), l.SKU).Error
			if err != nil {
				return err
			}
		}
		if err := awaitLeases(tx, lines); err != nil {
			return err
		}
		return fn(Tx{tx})
	})
}
