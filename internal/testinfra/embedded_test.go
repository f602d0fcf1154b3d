package testinfra_test

import (
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestEmbedded: under -short, MySQL gives each call a database of its own
// in SQLite, with the shop's schema, and OwnRedis gives each call a Redis
// of its own, whose keys are not another's.
func TestEmbedded(t *testing.T) {
	t.Parallel()
	if !testinfra.Embedded() {
		t.Skip("the embedded backends serve -short only; the shared servers' tests are TestMySQL and TestRedis")
	}
	a, b := testinfra.MySQL(t), testinfra.MySQL(t)
	if a == b || !strings.HasPrefix(a, db.SQLitePrefix) {
		t.Fatalf("DSNs %q and %q: want two SQLite files", a, b)
	}
	gdb := testinfra.ShopDB(t, a)
	if err := gdb.Exec(`INSERT INTO stock_items (sku, initial, available, updated_at) VALUES ('x', 1, 1, CURRENT_TIMESTAMP)`).Error; err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := testinfra.ShopDB(t, b).Raw(`SELECT COUNT(*) FROM stock_items`).Row().Scan(&n); err != nil || n != 0 {
		t.Errorf("the second database has %d rows (%v), want none of the first's", n, err)
	}

	r1, r2 := newRedis(t, testinfra.OwnRedis(t)), newRedis(t, testinfra.OwnRedis(t))
	if err := r1.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := r2.Exists(t.Context(), "k").Result(); err != nil || n != 0 {
		t.Errorf("the second Redis has the first's key: %d, %v", n, err)
	}
}
