package lua_test

import (
	"gorm.io/gorm"

	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/lua"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// clusterFleet is a lua fleet on a Redis Cluster of three masters of its
// own, with a claim timeout of claimIdle.
func clusterFleet(t *testing.T, claimIdle time.Duration) luaFleet {
	t.Helper()
	cluster := strings.Join(testinfra.StartRedisCluster(t), ",")
	return newLuaFleet(t, func(cfg *config.Config) {
		cfg.RedisAddr, cfg.RedisPrefix, cfg.ClaimIdle = cluster, "shop:", claimIdle
		cfg.RequestTimeout = min(cfg.RequestTimeout, claimIdle/2)
	})
}

// equalAfterReconcile runs one reconcile and checks, for every SKU, that
// Redis holds what the database has, with nothing pending.
func equalAfterReconcile(t *testing.T, f luaFleet, shop luaShop, skus []string, soldOut map[string]int) {
	t.Helper()
	for _, sku := range skus {
		f.settled(t, shop, sku, soldOut[sku], nil)
	}
}

// TestCartSagaOnRedisCluster: lua on a 3-master Redis Cluster, 3
// instances, 300 buyers of carts over 3 SKUs that live on 3 masters, in
// random order: each cart is a saga. No SKU is oversold, no order is
// partial, no buyer is busy, and after one reconcile Redis equals the
// database with nothing held.
func TestCartSagaOnRedisCluster(t *testing.T) {
	t.Parallel()
	f := clusterFleet(t, 30*time.Second)
	skus := testinfra.SKUsOnMasters(t, f.rdb.(*redis.ClusterClient), "line", 3)
	shops := []luaShop{f.new(), f.new(), f.new()}
	out := ordertest.CartBurstOf(t, skus, 7, shops[0].Service, shops[1].Service, shops[2].Service)
	if len(out.Others) > 0 {
		t.Errorf("%d buyers answered other than an order or sold out; first: %v", len(out.Others), out.Others[0])
	}
	if len(out.Acked) == 0 {
		t.Error("no cart was sold")
	}
	if _, partial := ordertest.AuditCartsOf(t, f.gdb, skus, out); partial > 0 {
		t.Errorf("%d orders have some lines and not others", partial)
	}
	equalAfterReconcile(t, f, shops[0], skus, out.SoldOut)
}

// TestCartSagaShopDies: a shop dies between two lines of a saga, holding
// the first line's units in Redis. Nothing is in the database, and once
// the reservation has been idle for the claim timeout, one reconcile on
// another shop gives it back: Redis equals the database again.
func TestCartSagaShopDies(t *testing.T) {
	t.Parallel()
	const idle = 2 * time.Second
	f := clusterFleet(t, idle)
	skus := testinfra.SKUsOnMasters(t, f.rdb.(*redis.ClusterClient), "line", 2)
	victim, survivor := f.new(), f.new()
	for _, sku := range skus {
		if _, err := survivor.SetStock(t.Context(), sku, 5); err != nil {
			t.Fatal(err)
		}
	}
	// The shop's process ends before its second line: nothing it would do
	// after runs, as when it is killed.
	lua.BetweenLines(victim.lua, func(line int) {
		if line == 1 {
			runtime.Goexit()
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = victim.Place(t.Context(), order.PlaceRequest{UserID: "ann", IdempotencyKey: "k-ann",
			Items: []order.Line{{SKU: skus[0], Quantity: 2}, {SKU: skus[1], Quantity: 1}}})
	}()
	<-done
	if got := f.redisAvailable(t, skus[0]); got != 3 {
		t.Fatalf("redis has %d of %s after the first line, want 3: the line held", got, skus[0])
	}
	rep, err := survivor.lua.Reconcile(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.redisAvailable(t, skus[0]); got != 3 {
		t.Errorf("a reconcile before the claim timeout gave the line back (%d left, %+v): its shop may still be persisting it", got, rep)
	}
	time.Sleep(idle + 500*time.Millisecond)
	equalAfterReconcile(t, f, survivor, skus, nil)
	if got := f.redisAvailable(t, skus[0]); got != 5 {
		t.Errorf("redis has %d of %s after the reconcile, want all 5 back", got, skus[0])
	}
}

// TestCartSagaRedisRestartsEmpty: Redis loses everything between two lines
// of a saga (FLUSHALL on every master: the data a restart with nothing on
// disk loses). The saga starts over on states built again from the
// database, and places the cart; nothing is held twice, and after one
// reconcile Redis equals the database.
func TestCartSagaRedisRestartsEmpty(t *testing.T) {
	t.Parallel()
	f := clusterFleet(t, 30*time.Second)
	skus := testinfra.SKUsOnMasters(t, f.rdb.(*redis.ClusterClient), "line", 3)
	shop := f.new()
	for _, sku := range skus {
		if _, err := shop.SetStock(t.Context(), sku, 5); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	lua.BetweenLines(shop.lua, func(line int) {
		if line == 2 {
			once.Do(func() {
				err := f.rdb.(*redis.ClusterClient).ForEachMaster(context.WithoutCancel(t.Context()), func(ctx context.Context, m *redis.Client) error {
					return m.FlushAll(ctx).Err()
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
	})
	o, _, err := shop.Place(t.Context(), order.PlaceRequest{UserID: "ann", IdempotencyKey: "k-ann",
		Items: []order.Line{{SKU: skus[2], Quantity: 1}, {SKU: skus[0], Quantity: 2}, {SKU: skus[1], Quantity: 1}}})
	if err != nil {
		t.Fatalf("the cart across an empty restart: %v", err)
	}
	if len(o.Items) != 3 {
		t.Errorf("order %+v, want 3 lines", o)
	}
	equalAfterReconcile(t, f, shop, skus, nil)
	for i, want := range []int{3, 4, 4} {
		if got := f.redisAvailable(t, skus[i]); got != want {
			t.Errorf("%s: redis has %d, want %d", skus[i], got, want)
		}
	}
}

// TestCartOneSlotIsOneScript: SKUs of one sale tag share a hash slot on
// the cluster, so their cart is reserved by one script, all or none: a
// cart refused for one short line holds nothing of the others, and names
// every short SKU.
func TestCartOneSlotIsOneScript(t *testing.T) {
	t.Parallel()
	f := clusterFleet(t, 30*time.Second)
	skus := []string{"{spring}boots", "{spring}coat", "{spring}hat"}
	if !f.stock.SameSlot(skus) {
		t.Fatalf("%v are not in one slot", skus)
	}
	if f.stock.SameSlot(testinfra.SKUsOnMasters(t, f.rdb.(*redis.ClusterClient), "line", 2)) {
		t.Fatal("SKUs on two masters are said to share a slot")
	}
	shop := f.new()
	for i, sku := range skus {
		if _, err := shop.SetStock(t.Context(), sku, i); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := shop.Place(t.Context(), order.PlaceRequest{UserID: "ann", IdempotencyKey: "k-ann",
		Items: []order.Line{{SKU: skus[2], Quantity: 2}, {SKU: skus[1], Quantity: 2}, {SKU: skus[0], Quantity: 1}}})
	var short interface{ Short() []string }
	if !errors.Is(err, stock.ErrSoldOut) || !errors.As(err, &short) || strings.Join(short.Short(), " ") != "{spring}boots {spring}coat" {
		t.Fatalf("a cart short of two lines: %v, want sold out naming both", err)
	}
	for i, sku := range skus {
		if got := f.redisAvailable(t, sku); got != i {
			t.Errorf("%s: redis has %d, want %d: nothing held", sku, got, i)
		}
	}
	if _, _, err := shop.Place(t.Context(), order.PlaceRequest{UserID: "bob", IdempotencyKey: "k-bob",
		Items: []order.Line{{SKU: skus[2], Quantity: 2}, {SKU: skus[1], Quantity: 1}}}); err != nil {
		t.Fatal(err)
	}
	equalAfterReconcile(t, f, shop, skus, map[string]int{skus[0]: 1, skus[1]: 1})
}

// TestCartRebuildBeforeSagaEnds: a rebuild of the SKUs' states (the
// reconciler's, or a buyer's after a stale state) runs once the database
// has a cart, but before its saga has ended its lines' reservations: the
// lines are still in the logs. Each line is in the database already, head
// row (which carries the Idempotency-Key) or not, so none counts as
// pending, though its units are in doubt while it is in a log. Once the
// saga has ended, Redis has what the database has, and the logs are empty:
// a unit taken twice would tell a buyer sold out while the database still
// has stock, and a line left in a log would keep its units in doubt.
func TestCartRebuildBeforeSagaEnds(t *testing.T) {
	t.Parallel()
	f := clusterFleet(t, 30*time.Second)
	skus := testinfra.SKUsOnMasters(t, f.rdb.(*redis.ClusterClient), "line", 2)
	shop := f.new()
	for _, sku := range skus {
		if _, err := shop.SetStock(t.Context(), sku, 3); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	_, err := placeCartThen(ctx, f.gdb, shop.lua, order.PlaceRequest{UserID: "ann", IdempotencyKey: "k-ann",
		Items: []order.Line{{SKU: skus[1], Quantity: 1}, {SKU: skus[0], Quantity: 2}}}, func() {
		if _, err := shop.lua.Reconcile(context.WithoutCancel(ctx), 0); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 2} {
		if got := f.redisAvailable(t, skus[i]); got != want {
			t.Errorf("%s: redis has %d after the cart, want %d as the database", skus[i], got, want)
		}
		if n, err := f.rdb.XLen(ctx, f.prefix+"lua:{"+skus[i]+"}:log").Result(); err != nil || n != 0 {
			t.Errorf("%s: %d entries left in the log (%v), want none", skus[i], n, err)
		}
	}
	equalAfterReconcile(t, f, shop, skus, nil)
}

// placeCartThen places r, a cart, through l on a service of its own, which
// runs then once the database has the cart, before its saga ends the
// lines' reservations in Redis: the seam between a batch of carts and its
// sagas' ends is the test's way in.
func placeCartThen(ctx context.Context, gdb *gorm.DB, l *lua.Lua, r order.PlaceRequest, then func()) (order.Order, error) {
	ran := false
	lua.CartPlaced(l, func() { ran = true; then() })
	defer lua.CartPlaced(l, nil)
	o, _, err := order.NewService(gdb, l.Placement(), nil).Place(ctx, r)
	if err == nil && !ran {
		err = errors.New("the cart was placed, but not through a batch of carts")
	}
	return o, err
}
