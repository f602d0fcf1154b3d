package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestAuditCommand: shop audit passes a SKU whose every unit is explained
// by its movements, and fails one that lost units outside them, naming
// the broken invariant.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	dsn := db.SQLitePrefix + filepath.Join(t.TempDir(), "shop.db")
	gdb := testinfra.ShopDB(t, dsn)
	for _, sku := range []string{"kept", "lost"} {
		if err := stock.Reset(t.Context(), gdb, sku, 5); err != nil {
			t.Fatal(err)
		}
	}
	if err := gdb.Exec(`UPDATE stock_items SET available = 3 WHERE sku = 'lost'`).Error; err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return map[string]string{"SHOP_MYSQL_DSN": dsn}[k] }
	var out bytes.Buffer
	if err := run(t.Context(), []string{"audit", "kept"}, getenv, &out, io.Discard); err != nil || !strings.Contains(out.String(), "ok") {
		t.Errorf("shop audit kept: %v\n%s", err, out.String())
	}
	out.Reset()
	err := run(t.Context(), []string{"audit", "kept", "lost"}, getenv, &out, io.Discard)
	if err == nil || !strings.Contains(out.String(), "lost: stock not conserved: available 3 + sold 0 != received 5") {
		t.Errorf("shop audit kept lost: %v\n%s", err, out.String())
	}
}

// TestAuditUnknownSKU: shop audit of a SKU the database does not have says
// so, naming it.
func TestAuditUnknownSKU(t *testing.T) {
	t.Parallel()
	dsn := db.SQLitePrefix + filepath.Join(t.TempDir(), "shop.db")
	testinfra.ShopDB(t, dsn)
	getenv := func(k string) string { return map[string]string{"SHOP_MYSQL_DSN": dsn}[k] }
	err := run(t.Context(), []string{"audit", "nosuch"}, getenv, io.Discard, io.Discard)
	if err == nil || err.Error() != `audit: SKU "nosuch" does not exist` {
		t.Errorf("shop audit nosuch: %v", err)
	}
}
