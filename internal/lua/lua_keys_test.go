package lua_test

import (
	"errors"
	"testing"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// TestLuaStoresKeys: on one Redis, lua's script that reserves claims the
// buyer's Idempotency-Key too, and keeps its answer (keysClaimed).
func TestLuaStoresKeys(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, func(cfg *config.Config) { cfg.PerUserLimit = 1 })
	keysClaimed(t, f, "keys", f.new(), f.new())
}

// keysClaimed checks, on a SKU of 2 units, what lua's one script does with
// a buyer's Idempotency-Key, across shops: a retry of the same request
// gets its first answer again, replayed, and reserves nothing, be it an
// order, sold out or over the per-user limit (1), even once a refund has
// put a unit back; the key used for another quantity is refused and takes
// nothing.
func keysClaimed(t *testing.T, f luaFleet, sku string, a, b luaShop) {
	t.Helper()
	ctx := t.Context()
	if _, err := a.SetStock(ctx, sku, 2); err != nil {
		t.Fatal(err)
	}
	buy := func(shop luaShop, user, key string, quantity int) (order.Order, bool, error) {
		return shop.Place(ctx, order.PlaceRequest{SKU: sku, UserID: user, Quantity: quantity, IdempotencyKey: key})
	}
	// retry sends the request again on the other shop: its answer must be
	// first's, replayed, and reserve nothing.
	retry := func(user, key string, first order.Order, firstErr error) {
		t.Helper()
		before := f.logged(t, sku)
		o, replayed, err := buy(b, user, key, 1)
		if !replayed || o.ID != first.ID || !o.CreatedAt.Equal(first.CreatedAt) || (err == nil) != (firstErr == nil) ||
			(err != nil && err.Error() != firstErr.Error()) {
			t.Errorf("%s's retry: order %d, replayed %v, %v; want its first answer replayed: order %d, %v", user, o.ID, replayed, err, first.ID, firstErr)
		}
		if n := f.logged(t, sku) - before; n != 0 {
			t.Errorf("%s's retry reserved %d units, want none", user, n)
		}
	}

	ann, _, err := buy(a, "ann", "k-ann", 1)
	if err != nil {
		t.Fatal(err)
	}
	retry("ann", "k-ann", ann, nil)
	if _, _, err := buy(b, "ann", "k-ann", 2); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("ann's key for another quantity: %v, want ErrKeyReused", err)
	}
	_, _, overLimit := buy(a, "ann", "k-ann-2", 1)
	if !errors.Is(overLimit, order.ErrLimitReached) {
		t.Fatalf("ann's second unit: %v, want the limit reached", overLimit)
	}
	if _, _, err := buy(a, "bob", "k-bob", 1); err != nil {
		t.Fatal(err)
	}
	_, _, soldOut := buy(a, "cat", "k-cat", 1)
	if !errors.Is(soldOut, stock.ErrSoldOut) {
		t.Fatalf("cat after the last unit: %v, want sold out", soldOut)
	}
	if _, _, err := a.Refund(ctx, ann.ID, "ann", "refund-ann"); err != nil {
		t.Fatal(err)
	}
	// A unit is back, and ann holds none: the first answers stand.
	retry("cat", "k-cat", order.Order{}, soldOut)
	retry("ann", "k-ann-2", order.Order{}, overLimit)
	if got := f.redisAvailable(t, sku); got != 1 {
		t.Errorf("redis has %d available after the retries, want the refunded 1", got)
	}
	dan, _, err := buy(b, "dan", "k-dan", 1)
	if err != nil {
		t.Fatalf("dan, after the refund: %v", err)
	}
	var bob int64
	if err := f.gdb.Raw(`SELECT id FROM orders WHERE user_id = 'bob'`).Scan(&bob).Error; err != nil {
		t.Fatal(err)
	}
	f.settled(t, a, sku, 1, []int64{bob, dan.ID})
}
