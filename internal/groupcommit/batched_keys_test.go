package groupcommit_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stockguard/shop/internal/idempotency"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/groupcommit"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestBatchedStoresKeys: the service keeps the Idempotency-Keys of batched's
// buyers, across two instances: concurrent requests under one key make one
// order, whatever batches they land in,
// each of the others told the first is in progress or replaying it; a
// refusal is kept and replayed, even once a refund has put a unit back; a
// key used for another quantity is refused; and with Redis gone, orders
// and their replays go on, from the database.
func TestBatchedStoresKeys(t *testing.T) {
	t.Parallel()
	_, gdb := ordertest.Instances(t, "batched")
	srv := testinfra.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	newShop := func() *order.Service {
		return order.NewService(gdb, groupcommit.NewBatched(gdb, order.Rules{}).Placement(), &order.Options{Keys: &order.KeyOptions{Redis: rdb}})
	}
	a, b := newShop(), newShop()
	if !a.StoresKeys() {
		t.Fatal("batched with a Redis for its answers does not keep its keys")
	}
	ctx := t.Context()
	const sku = "kept"
	if _, err := a.SetStock(ctx, sku, 2); err != nil {
		t.Fatal(err)
	}
	buy := func(shop *order.Service, user, key string, quantity int) (order.Order, bool, error) {
		return shop.Place(ctx, order.PlaceRequest{SKU: sku, UserID: user, Quantity: quantity, IdempotencyKey: key})
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	made := map[int64]bool{}
	for i := range 20 {
		wg.Go(func() {
			o, _, err := buy([]*order.Service{a, b}[i%2], "ann", "double-click", 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made[o.ID] = true
			case !errors.Is(err, idempotency.ErrInProgress):
				t.Errorf("a double click: %v, want the order or in progress", err)
			}
		})
	}
	wg.Wait()
	if len(made) != 1 {
		t.Fatalf("orders %v for one key, want one", made)
	}
	var ann int64
	for id := range made {
		ann = id
	}

	if _, _, err := buy(a, "bob", "bob-1", 1); err != nil {
		t.Fatal(err)
	}
	_, _, soldOut := buy(b, "cat", "cat-1", 1)
	if !errors.Is(soldOut, stock.ErrSoldOut) {
		t.Fatalf("cat after the last unit: %v, want sold out", soldOut)
	}
	if _, _, err := a.Refund(ctx, ann, "ann", "refund-ann"); err != nil {
		t.Fatal(err)
	}
	if _, replayed, err := buy(a, "cat", "cat-1", 1); !replayed || err == nil || err.Error() != soldOut.Error() {
		t.Errorf("cat again, with a unit back: replayed %v, %v; want %q replayed", replayed, err, soldOut)
	}
	if _, _, err := buy(a, "cat", "cat-1", 2); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("cat's key for another quantity: %v, want reused", err)
	}

	srv.Kill()
	if o, replayed, err := buy(b, "bob", "bob-1", 1); err != nil || !replayed {
		t.Errorf("bob again, Redis gone: order %d, replayed %v, %v; want his order replayed", o.ID, replayed, err)
	}
	if _, _, err := buy(b, "dan", "dan-1", 1); err != nil {
		t.Errorf("dan, Redis gone: %v, want the refunded unit", err)
	}
	if au := auditOf(t, gdb, sku); au.Orders != 2 || au.Available != 0 {
		t.Errorf("audit %+v, want 2 orders and none left", au)
	}
}
