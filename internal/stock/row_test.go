package stock_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestRowChangesBumpVersion: every change of available, a take, a give
// and a set, bumps the row's version, whoever makes it; a take the stock
// cannot cover changes nothing.
func TestRowChangesBumpVersion(t *testing.T) {
	t.Parallel()
	gdb := open(t, testinfra.MySQL(t))
	ctx := t.Context()
	read := func() stock.Item {
		it, err := stock.Get(ctx, gdb, "hot")
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	before := read()
	err := gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if took, err := stock.Take(tx, "hot", 6); err != nil || took {
			t.Errorf("take 6 of 5: %v, %v; want refused", took, err)
		}
		if took, err := stock.Take(tx, "hot", 2); err != nil || !took {
			t.Errorf("take 2 of 5: %v, %v; want taken", took, err)
		}
		if err := stock.Give(tx, "hot", 1); err != nil {
			return err
		}
		_, err := stock.Set(tx, "hot", 7, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if after := read(); after.Available != 7 || after.Version != before.Version+3 {
		t.Errorf("available %d, version %d; want 7 and %d", after.Available, after.Version, before.Version+3)
	}
}
