package db_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestStockMovementsMigration: SKUs of a database made before the ledger
// get one initial movement each, equal to their initial column, when it
// migrates up; and down to the baseline and up again does the same, on
// MySQL and on SQLite.
func TestStockMovementsMigration(t *testing.T) {
	t.Parallel()
	for name, dsn := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			ctx, gdb := t.Context(), testinfra.OpenDB(t, dsn)
			if err := db.MigrateFrom(ctx, gdb, baselineOnly(t, gdb)); err != nil {
				t.Fatal(err)
			}
			exec(t, gdb, `INSERT INTO stock_items (sku, initial, available, updated_at) VALUES ('a', 7, 3, CURRENT_TIMESTAMP), ('b', 0, 0, CURRENT_TIMESTAMP)`)
			if err := db.Migrate(ctx, gdb); err != nil {
				t.Fatal(err)
			}
			initialMovements(t, gdb, "up")
			st := status(t, gdb)
			if err := db.MigrateDown(ctx, gdb, len(st.Versions)-1); err != nil {
				t.Fatal(err)
			}
			if err := db.Migrate(ctx, gdb); err != nil {
				t.Fatal(err)
			}
			initialMovements(t, gdb, "down to the baseline and up")
		})
	}
}

func exec(t *testing.T, gdb *gorm.DB, stmt string) {
	t.Helper()
	if err := gdb.Exec(stmt).Error; err != nil {
		t.Fatal(err)
	}
}

// initialMovements fails t unless SKUs a and b have one movement each, an
// initial one equal to their initial column.
func initialMovements(t *testing.T, gdb *gorm.DB, by string) {
	t.Helper()
	var got []struct {
		SKU    string `gorm:"column:sku"`
		Delta  int
		Reason string
		Actor  string
	}
	if err := gdb.Raw(`SELECT sku, delta, reason, actor FROM stock_movements ORDER BY sku, id`).Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].SKU != "a" || got[0].Delta != 7 || got[1].SKU != "b" || got[1].Delta != 0 ||
		got[0].Reason != "initial" || got[1].Reason != "initial" || got[0].Actor != "system" {
		t.Errorf("after %s: movements %+v, want one initial of 7 for a and of 0 for b", by, got)
	}
}
