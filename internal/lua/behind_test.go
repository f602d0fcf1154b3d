package lua_test

import (
	"errors"
	"testing"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestLuaStateBehind: a SKU's Redis state goes back to what it was
// before its last writes, in the same epoch, as on a replica promoted to
// master that lacked them: here a refund's unit, which Redis had given
// back, is missing, so Redis says sold out while the database has a unit.
// The shop's connection to Redis is cut meanwhile, as a failover cuts it.
// The next buyer must get that unit: the shop checks the state against the
// database after a Redis failure, before it sells from it again. The
// state is rolled back with DUMP and RESTORE, on a real Redis.
func TestLuaStateBehind(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it cuts the shop's connection to Redis and restores keys with DUMP and RESTORE")
	var proxy *testinfra.Proxy
	f := newLuaFleet(t, func(cfg *config.Config) {
		proxy = testinfra.StartProxy(t, cfg.RedisAddr)
		cfg.RedisAddr = proxy.Addr()
	})
	shop := f.new()
	const sku = "behind"
	ann, buy := refundLost(t, f, shop, sku, func() {})
	proxy.Cut()
	if _, err := buy("during"); !errors.Is(err, stock.ErrBusy) {
		t.Errorf("a buyer while Redis is cut off: %v, want busy", err)
	}
	proxy.Mend()
	o, err := buy("carol")
	if err != nil {
		t.Fatalf("carol, with a unit left in the database: %v; want her order", err)
	}
	f.settled(t, shop, sku, 0, []int64{ann, o.ID})
}

// TestLuaStateBehindSentinel: TestLuaStateBehind with Redis a master
// under Sentinel, handed over to its replica (SENTINEL FAILOVER) after a
// refund gave a unit back in Redis. The shop follows the new master
// without an error it could see: the old master drops its clients, and
// the next call dials the new one. The new master lacks the refund's
// write, as a replica that had fallen behind would (the test rolls the
// SKU's keys back on it with DUMP and RESTORE), and the next buyer must
// get the unit.
func TestLuaStateBehindSentinel(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it fails a Redis master over under Sentinel")
	r := testinfra.StartRedisSentinel(t)
	f := newLuaFleet(t, func(cfg *config.Config) { cfg.RedisAddr, cfg.RedisSentinel = r.Addr(), r.Name })
	shop := f.new()
	const sku = "behind-sentinel"
	ann, buy := refundLost(t, f, shop, sku, func() { r.Failover(r.Master()) })
	o, err := buy("carol")
	if err != nil {
		t.Fatalf("carol, with a unit left in the database: %v; want her order", err)
	}
	f.settled(t, shop, sku, 0, []int64{ann, o.ID})
}

// refundLost sells sku's 2 units to ann and bob on shop, refunds bob's,
// runs between, and rolls sku's Redis keys back to before the refund: a
// Redis behind the database by one unit. It returns ann's order, and how
// to buy a unit of sku.
func refundLost(t *testing.T, f luaFleet, shop luaShop, sku string, between func()) (ann int64, buy func(user string) (order.Order, error)) {
	t.Helper()
	ctx := t.Context()
	if _, err := shop.SetStock(ctx, sku, 2); err != nil {
		t.Fatal(err)
	}
	buy = func(user string) (order.Order, error) {
		o, _, err := shop.Place(ctx, order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: "k-" + user})
		return o, err
	}
	var acked []int64
	for _, user := range []string{"ann", "bob"} {
		o, err := buy(user)
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, o.ID)
	}
	rollBack := f.dump(t, sku)
	if _, _, err := shop.Refund(ctx, acked[1], "bob", "refund-bob"); err != nil {
		t.Fatal(err)
	}
	between()
	rollBack() // the refund's write is lost
	if got := f.redisAvailable(t, sku); got != 0 {
		t.Fatalf("redis has %d available after the rollback, want 0", got)
	}
	return acked[0], buy
}

// dump saves sku's Redis keys, and returns what writes them back as they
// were, dropping every write since.
func (f luaFleet) dump(t *testing.T, sku string) (rollBack func()) {
	t.Helper()
	ctx := t.Context()
	keys, err := f.rdb.Keys(ctx, f.prefix+"lua:{"+sku+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no keys of %s: %v", sku, err)
	}
	dumps := make([]string, len(keys))
	for i, k := range keys {
		if dumps[i], err = f.rdb.Dump(ctx, k).Result(); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		t.Helper()
		for i, k := range keys {
			if err := f.rdb.RestoreReplace(ctx, k, 0, dumps[i]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
