package audit_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
)

// initialMovements records, for each SKU that has none, the movement that
// putting it on sale records: its initial stock.
func initialMovements(t *testing.T, gdb *gorm.DB) {
	t.Helper()
	err := gdb.Exec(`INSERT INTO stock_movements (sku, delta, reason, reference, actor, idempotency_key, created_at)
		SELECT sku, initial, 'initial', '', 'system', '', CURRENT_TIMESTAMP FROM stock_items s
		WHERE NOT EXISTS (SELECT 1 FROM stock_movements m WHERE m.sku = s.sku)`).Error
	if err != nil {
		t.Fatal(err)
	}
}

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
	initialMovements(t, gdb)
	a, err := audit.SKU(t.Context(), gdb, "phone", 4, []int64{1, 2, 3, 3, 99})
	if err != nil {
		t.Fatal(err)
	}
	want := audit.Audit{SKU: "phone", Initial: 5, Available: 2, Received: 5, Orders: 3, Sold: 3, Undersold: 2, LostAcks: 1}
	if a != want {
		t.Errorf("audit %+v\nwant  %+v", a, want)
	}
	v := strings.Join(a.Violations(), "; ")
	for _, broken := range []string{"undersold 2 units", "1 acknowledged orders have no row"} {
		if !strings.Contains(v, broken) {
			t.Errorf("violations %q lack %q", v, broken)
		}
	}
	if strings.Contains(v, "not conserved") {
		t.Errorf("violations %q: the initial movement explains every unit", v)
	}

	// A restock recorded but whose units never reached available: 3
	// units not explained.
	err = gdb.Exec(`INSERT INTO stock_movements (sku, delta, reason, reference, actor, created_at)
		VALUES ('phone', 3, 'restock', 'PO-1', 'admin', CURRENT_TIMESTAMP)`).Error
	if err != nil {
		t.Fatal(err)
	}
	if a, err = audit.SKU(t.Context(), gdb, "phone", 0, nil); err != nil {
		t.Fatal(err)
	}
	if v := strings.Join(a.Violations(), "; "); a.Received != 8 || a.Drift != -3 || !strings.Contains(v, "available 2 + sold 3 != received 8") {
		t.Errorf("received %d, drift %d, violations %q; want 8, -3, not conserved", a.Received, a.Drift, v)
	}
}

// TestSKUsCarts audits carts on MySQL (SQLite under -short): each line a
// row, the head's id the order's and every other line's cart_id. A whole
// cart breaks nothing; a cart refunded but for one line, and an
// acknowledged cart without the row of one of its lines, are partial
// orders, seen in the audit of each SKU they touch.
func TestSKUsCarts(t *testing.T) {
	t.Parallel()
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	exec := func(stmts ...string) {
		t.Helper()
		for _, stmt := range stmts {
			if err := gdb.Exec(stmt).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	stocked := func(values string) {
		t.Helper()
		exec(`INSERT INTO stock_items (sku, initial, available, updated_at) VALUES ` + values)
		initialMovements(t, gdb)
	}
	const columns = `INSERT INTO orders (id, cart_id, sku, user_id, quantity, status, idempotency_key, created_at) VALUES `

	t.Run("whole", func(t *testing.T) {
		// Order 1 is a cart of a, b and c; order 4 is b alone.
		stocked(`('w-a', 5, 4, CURRENT_TIMESTAMP), ('w-b', 5, 3, CURRENT_TIMESTAMP), ('w-c', 5, 4, CURRENT_TIMESTAMP)`)
		exec(columns + `(1, NULL, 'w-a', 'u', 1, 'created', 'k1', CURRENT_TIMESTAMP),
				(2, 1, 'w-b', 'u', 1, 'created', NULL, CURRENT_TIMESTAMP),
				(3, 1, 'w-c', 'u', 1, 'created', NULL, CURRENT_TIMESTAMP),
				(4, NULL, 'w-b', 'v', 1, 'created', 'k4', CURRENT_TIMESTAMP)`)
		skus := []string{"w-a", "w-b", "w-c"}
		total, each, err := audit.SKUs(t.Context(), gdb, skus, nil, []audit.Acked{{ID: 1, SKUs: []string{"w-c", "w-a", "w-b"}}, {ID: 4, SKUs: []string{"w-b"}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range append(each, total) {
			if v := a.Violations(); len(v) > 0 {
				t.Errorf("%s: %q, want none", a.SKU, v)
			}
		}
		if total.Orders != 2 || total.Sold != 4 || total.Initial != 15 || len(each) != 3 || each[1].Orders != 2 {
			t.Errorf("total %+v, each %+v; want 2 orders of 4 units from 15, and b's 2", total, each)
		}
	})

	t.Run("partial", func(t *testing.T) {
		// Order 10 was refunded but for its line of b; order 20, a cart of
		// a and c acknowledged, has no row for c.
		stocked(`('p-a', 5, 4, CURRENT_TIMESTAMP), ('p-b', 5, 4, CURRENT_TIMESTAMP), ('p-c', 5, 5, CURRENT_TIMESTAMP)`)
		exec(columns + `(10, NULL, 'p-a', 'u', 1, 'refunded', 'k10', CURRENT_TIMESTAMP),
				(11, 10, 'p-b', 'u', 1, 'created', NULL, CURRENT_TIMESTAMP),
				(20, NULL, 'p-a', 'v', 1, 'created', 'k20', CURRENT_TIMESTAMP)`)
		skus := []string{"p-a", "p-b", "p-c"}
		acked := []audit.Acked{{ID: 10, SKUs: []string{"p-b", "p-a"}}, {ID: 20, SKUs: []string{"p-c", "p-a"}}}
		total, each, err := audit.SKUs(t.Context(), gdb, skus, nil, acked)
		if err != nil {
			t.Fatal(err)
		}
		want := []audit.Audit{
			{SKU: "p-a", Initial: 5, Available: 4, Received: 5, Orders: 1, Sold: 1, Partial: 1},
			{SKU: "p-b", Initial: 5, Available: 4, Received: 5, Orders: 1, Sold: 1, Partial: 1},
			{SKU: "p-c", Initial: 5, Available: 5, Received: 5, MissingLines: 1},
		}
		for i := range want {
			if each[i] != want[i] {
				t.Errorf("audit %+v\nwant  %+v", each[i], want[i])
			}
		}
		if total.Orders != 2 || total.Partial != 1 || total.MissingLines != 1 {
			t.Errorf("total: %d orders, %d partial, %d missing lines; want 2, 1 (order 10, once), 1", total.Orders, total.Partial, total.MissingLines)
		}
		for sku, broken := range map[string]string{
			"p-a": "1 partial orders: their rows differ in status",
			"p-c": "1 acknowledged carts have no row for their line of p-c: partial orders",
		} {
			i := slices.Index(skus, sku)
			if v := strings.Join(each[i].Violations(), "; "); !strings.Contains(v, broken) {
				t.Errorf("%s: violations %q lack %q", sku, v, broken)
			}
		}
	})
}
