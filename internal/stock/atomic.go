package stock

import (
	"context"
	"errors"

	"gorm.io/gorm"
)

// Atomic guards stock with one conditional UPDATE: the database checks and
// changes the row under its own row lock, so no read can go stale.
type Atomic struct{ db *gorm.DB }

// NewAtomic returns the atomic strategy.
func NewAtomic(gdb *gorm.DB) *Atomic { return &Atomic{db: gdb} }

// Adjust implements the strategy.
func (s *Atomic) Adjust(ctx context.Context, sku string, delta int, fn Fn) error {
	return s.AdjustLines(ctx, []Line{{SKU: sku, Delta: delta}}, fn)
}

// AdjustLines implements the strategy: one conditional UPDATE per line, in
// ascending SKU order, each one's affected rows checked. A short line does
// not stop the others, so that the refusal names every short SKU; the
// transaction then rolls back.
func (s *Atomic) AdjustLines(ctx context.Context, lines []Line, fn Fn) error {
	lines = Sorted(lines)
	return Transact(ctx, s.db, func(tx *gorm.DB) error {
		var sh short
		for _, l := range lines {
			changed, err := change(tx, l.SKU, l.Delta)
			if err != nil {
				return err
			}
			if !changed {
				if err := missing(ctx, tx, l.SKU); !errors.Is(err, ErrSoldOut) {
					return err
				}
				sh = append(sh, l.SKU)
			}
		}
		if err := sh.err(); err != nil {
			return err
		}
		return fn(Tx{tx})
	})
}
