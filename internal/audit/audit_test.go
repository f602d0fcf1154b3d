package audit_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
)

func TestSKU(t *testing.T) {
	t.Parallel()
	gdb := testinfra.ShopDB(t, db.SQLitePrefix+filepath.Join(t.TempDir(), "shop.db"))
	// 5 units, 3 live orders and a refunded one, and 2 units left although
	// buyers were told it was sold out.
	for _, stmt := range []string{
		`INSERT INTO stock_items (sku, initial, available, updated_at) VALUES ('phone', 5, 2, CURRENT_TIMESTAMP)`,
		`INSERT INTO orders (id, sku, user_id, quantity, status, idempotency_key, created_at) VALUES
			(1, 'phone', 'a', 1, 'created', 'k', CURRENT_TIMESTAMP),
			(2, 'phone', 'b', 1, 'created', 'k', CURRENT_TIMESTAMP),
			(3, 'phone', 'c', 1, 'created', 'k', CURRENT_TIMESTAMP),
			(4, 'phone', 'd', 1, 'refunded', 'k', CURRENT_TIMESTAMP)`,
	} {
		if err := gdb.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	a, err := audit.SKU(t.Context(), gdb, "phone", 4, []int64{1, 2, 3, 3, 99})
	if err != nil {
		t.Fatal(err)
	}
	want := audit.Audit{SKU: "phone", Initial: 5, Available: 2, Orders: 3, Sold: 3, Undersold: 2, LostAcks: 1}
	if a != want {
		t.Errorf("audit %+v\nwant  %+v", a, want)
	}
	v := strings.Join(a.Violations(), "; ")
	for _, broken := range []string{"undersold 2 units", "1 acknowledged orders have no row"} {
		if !strings.Contains(v, broken) {
			t.Errorf("violations %q lack %q", v, broken)
		}
	}
}
