package lua_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// TestLuaStockChange: a change of an existing SKU's stock reaches Redis
// at once, in the same epoch, with no reconcile, and the SKU sells out
// from it; a delete drops the SKU's Redis state and moves its epoch on, so
// that the SKU set up again starts a new sale.
func TestLuaStockChange(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, nil)
	a, b := f.new(), f.new()
	const sku = "change"
	if _, err := a.SetStock(t.Context(), sku, 50); err != nil {
		t.Fatal(err)
	}
	first, _, others := place(t, sku, 30, a, b)
	if len(first) != 30 || len(others) > 0 {
		t.Fatalf("%d of 30 sold: %v", len(first), others)
	}
	epoch := func() int64 {
		t.Helper()
		var e int64
		if err := f.gdb.Raw(`SELECT epoch FROM stock_epochs WHERE sku = ?`, sku).Row().Scan(&e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	before := epoch()
	s, err := b.SetStock(t.Context(), sku, 40)
	if err != nil {
		t.Fatal(err)
	}
	if s != (order.Stock{SKU: sku, Initial: 70, Available: 40, Sold: 30, Received: 70}) {
		t.Errorf("stock after the change %+v, want 70 initial, 40 available, 30 sold", s)
	}
	if got := f.redisAvailable(t, sku); got != 40 || epoch() != before {
		t.Errorf("redis has %d in epoch %d, want 40 in epoch %d", got, epoch(), before)
	}
	var acked []int64
	for i := range 60 { // other buyers than the first 30
		o, _, err := []luaShop{a, b}[i%2].Place(t.Context(), order.PlaceRequest{SKU: sku, UserID: fmt.Sprint("later-", i), Quantity: 1, IdempotencyKey: "k"})
		switch {
		case err == nil:
			acked = append(acked, o.ID)
		case !errors.Is(err, stock.ErrSoldOut):
			t.Fatal(err)
		}
	}
	if len(acked) != 40 {
		t.Errorf("%d sold after the change, want 40", len(acked))
	}
	if au := f.settled(t, a, sku, 20, append(first, acked...)); au.Orders != 70 || au.Available != 0 {
		t.Errorf("%d orders, %d available; want 70 and 0", au.Orders, au.Available)
	}

	if err := a.DeleteStock(t.Context(), sku); err != nil {
		t.Fatal(err)
	}
	if got := f.redisAvailable(t, sku); got != -1 || epoch() <= before {
		t.Errorf("after the delete redis has %d, epoch %d; want no state, and an epoch past %d", got, epoch(), before)
	}
	deleted := epoch()
	if _, err := b.SetStock(t.Context(), sku, 5); err != nil {
		t.Fatal(err)
	}
	// A request of the first sale, retried, is a new order of the new
	// sale: the delete took its first order, and the answer kept with it.
	o, replayed, err := a.Place(t.Context(), order.PlaceRequest{SKU: sku, UserID: "user-0", Quantity: 1, IdempotencyKey: "k-0"})
	if err != nil || replayed || slices.Contains(first, o.ID) {
		t.Errorf("a retry of the first sale after the delete: order %d, replayed %v, %v; want a new order", o.ID, replayed, err)
	}
	again, _, others := placeAs(t, "anew", sku, 10, a, b)
	if len(again) != 4 || len(others) > 0 || epoch() <= deleted {
		t.Errorf("set up again: %d sold of the 4 left (%v) in epoch %d; want a new epoch past %d", len(again), others, epoch(), deleted)
	}
	f.settled(t, a, sku, 5, append(again, o.ID))
}

// TestLuaAdjustments: under lua, an adjustment commits in the database and
// then reaches Redis at once, in the same epoch; one below 0 changes
// neither, and a replay reaches Redis no second time.
func TestLuaAdjustments(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, nil)
	a, b := f.new(), f.new()
	const sku = "adjusted"
	if _, err := a.SetStock(t.Context(), sku, 10); err != nil {
		t.Fatal(err)
	}
	// A sale builds the SKU's Redis state: 9 left.
	if sold, _, others := place(t, sku, 1, a); len(sold) != 1 || len(others) > 0 {
		t.Fatalf("first sale: %v %v", sold, others)
	}
	adjust := func(shop luaShop, key string, delta, want int, wantErr error) {
		t.Helper()
		_, _, err := shop.Adjust(t.Context(), stock.Movement{SKU: sku, Delta: delta, Reason: stock.ReasonCorrection, Key: &key})
		if !errors.Is(err, wantErr) {
			t.Fatalf("adjust %s by %d: %v, want %v", key, delta, err, wantErr)
		}
		st, err := shop.Stock(t.Context(), sku)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.redisAvailable(t, sku); got != want || st.Available != want || st.Received != want+st.Sold {
			t.Errorf("after %s by %d: redis %d, database %+v; want %d available in both, received %d", key, delta, got, st, want, want+st.Sold)
		}
	}
	adjust(a, "up", 5, 14, nil)
	adjust(b, "up", 5, 14, nil) // a replay, on another instance
	adjust(b, "down", -3, 11, nil)
	adjust(a, "too-many", -12, 11, stock.ErrInsufficient)
}
