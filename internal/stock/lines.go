package stock

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// Line is one SKU's change in a change of several: a cart's line. Every
// strategy applies a cart's lines all or none, in one transaction, and
// takes its SKUs (rows, locks, turns) in ascending order, so that two
// carts that share SKUs never wait for each other in a circle. See
// docs/orders.md#carts.
type Line struct {
	SKU   string
	Delta int
}

// Sorted returns lines in ascending SKU order, the one order in which every
// strategy takes a cart's SKUs. A single line is returned as it is.
func Sorted(lines []Line) []Line {
	if len(lines) < 2 || slices.IsSortedFunc(lines, byLineSKU) {
		return lines
	}
	s := slices.Clone(lines)
	slices.SortFunc(s, byLineSKU)
	return s
}

func byLineSKU(a, b Line) int { return cmp.Compare(a.SKU, b.SKU) }

// ShortError is ErrSoldOut naming the SKUs that were short: of a cart, all
// of them, so that the buyer can drop them at once. Nothing was taken.
type ShortError struct{ SKUs []string }

func (e *ShortError) Error() string { return "stock: sold out: " + strings.Join(e.SKUs, ", ") }

// Short returns the SKUs that were short.
func (e *ShortError) Short() []string { return e.SKUs }

// Is makes errors.Is(err, ErrSoldOut) hold.
func (e *ShortError) Is(target error) bool { return target == ErrSoldOut }

// short gathers the SKUs a change of several lines found short.
type short []string

// err is the ShortError of what was gathered, or nil.
func (s short) err() error {
	if len(s) == 0 {
		return nil
	}
	return &ShortError{SKUs: s}
}

// soldOut is sku's sold-out refusal.
func soldOut(sku string) error { return &ShortError{SKUs: []string{sku}} }

// read reads the stock of every line with a plain read, outside any
// transaction, and returns the items, by line, and the SKUs that were
// short.
func read(ctx context.Context, gdb *gorm.DB, lines []Line) ([]Item, short, error) {
	items := make([]Item, len(lines))
	var sh short
	for i, l := range lines {
		it, err := Get(ctx, gdb, l.SKU)
		if err != nil {
			return nil, nil, err
		}
		if it.Available+l.Delta < 0 {
			sh = append(sh, l.SKU)
		}
		items[i] = it
	}
	return items, sh, nil
}
