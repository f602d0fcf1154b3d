package order_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
)

// TestSetStockWhileSelling: under every guarded strategy, 200 buyers,
// spread over the instances, buy a SKU's 50 units while its stock is set
// to 10, five times over, from the instances in turn. Every order is kept
// and every acknowledged one is in the database, the stock is conserved
// and never oversold, and a lock strategy's fence never goes back.
func TestSetStockWhileSelling(t *testing.T) {
	const changes, changedTo = 5, 10
	// none loses updates, the changes' as well as the buyers'.
	guarded := slices.DeleteFunc(strategy.All(), func(s strategy.Strategy) bool { return s.Name == "none" })
	strategytest.Each(t, guarded, func(t *testing.T, s strategy.Strategy) {
		shops, gdb := fleet(t, s)
		ctx := t.Context()
		sku := "restock-" + s.Name
		if _, err := shops[0].SetStock(ctx, sku, ordertest.Units); err != nil {
			t.Fatal(err)
		}
		acked, _, others := ordertest.Release(ctx, sku, func() {
			for i := range changes {
				before, err := stock.Get(ctx, gdb, sku)
				if err == nil {
					_, err = shops[i%len(shops)].SetStock(ctx, sku, changedTo)
				}
				after, errAfter := stock.Get(ctx, gdb, sku)
				if err = errors.Join(err, errAfter); err != nil {
					t.Errorf("change %d: %v", i, err)
					return
				}
				if after.Fence < before.Fence {
					t.Errorf("change %d took the fence back from %d to %d", i, before.Fence, after.Fence)
				}
			}
		}, shops...)
		for _, err := range others {
			t.Errorf("a buyer: %v", err)
		}
		// A sold-out answer given before a change was true, and stock
		// may be left after the last: no undersell is counted.
		a, err := audit.SKU(context.WithoutCancel(ctx), gdb, sku, 0, acked)
		if err != nil {
			t.Fatal(err)
		}
		if v := a.Violations(); len(v) > 0 {
			t.Errorf("invariants broken: %v", v)
		}
		if a.Orders != len(acked) {
			t.Errorf("%d orders in the database, %d acknowledged", a.Orders, len(acked))
		}
		t.Logf("%d sold, %d left, initial %d", a.Sold, a.Available, a.Initial)
	})
}

// TestDeleteStock: a SKU deleted goes with its orders; one
// deleted twice, or never set up, is not found; one set up again under the
// same name starts from nothing.
func TestDeleteStock(t *testing.T) {
	t.Parallel()
	svc, gdb := ordertest.NewService(t, "atomic")
	ctx := t.Context()
	if _, err := svc.SetStock(ctx, "gone", 5); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Place(ctx, order.PlaceRequest{SKU: "gone", UserID: "ann", Quantity: 2, IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteStock(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	var orders int
	if err := gdb.Raw(`SELECT COUNT(*) FROM orders WHERE sku = 'gone'`).Row().Scan(&orders); err != nil || orders != 0 {
		t.Errorf("%d orders left (%v)", orders, err)
	}
	if _, err := svc.Stock(ctx, "gone"); !errors.Is(err, stock.ErrNotFound) {
		t.Errorf("stock after the delete: %v, want not found", err)
	}
	for _, sku := range []string{"gone", "never"} {
		if err := svc.DeleteStock(ctx, sku); !errors.Is(err, stock.ErrNotFound) {
			t.Errorf("delete %s: %v, want not found", sku, err)
		}
	}
	if s, err := svc.SetStock(ctx, "gone", 3); err != nil || s != (order.Stock{SKU: "gone", Initial: 3, Available: 3, Received: 3}) {
		t.Errorf("set up again: %+v %v", s, err)
	}
}
