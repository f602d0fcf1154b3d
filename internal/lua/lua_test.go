package lua_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/lua/redisstock"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/lua"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// luaShop is one instance of the lua strategy, built as the registry
// builds it, with its Lua, whose Reconcile is the job that app runs on one
// instance.
type luaShop struct {
	*order.Service
	lua *lua.Lua
	// stop closes the shop, once: at cleanup, or when a test stops it
	// first, as a process that dies.
	stop func()
}

// luaFleet is instances of the lua strategy on one database and Redis
// namespace, with a view of the Redis stock for the checks.
type luaFleet struct {
	gdb    *gorm.DB
	rdb    redis.UniversalClient
	prefix string
	stock  *redisstock.Stock // the Redis half of lua, read directly
	new    func() luaShop
	// newWith is new with the configuration changed by set first.
	newWith func(set func(*config.Config)) luaShop
}

// newLuaFleet opens a fresh database and Redis namespace for lua; set,
// when not nil, changes the configuration first (another Redis, a limit,
// a claim timeout).
func newLuaFleet(t *testing.T, set func(*config.Config)) luaFleet {
	t.Helper()
	s, err := strategy.Lookup("lua")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strategytest.Config(t, s)
	if set != nil {
		set(&cfg)
	}
	rdb := backend.NewRedis(backend.RedisOptions(cfg))
	t.Cleanup(func() { rdb.Close() })
	gdb := testinfra.ShopDB(t, cfg.MySQLDSN)
	f := luaFleet{gdb: gdb, rdb: rdb, prefix: cfg.RedisPrefix, stock: redisstock.New(rdb, cfg.RedisPrefix)}
	f.newWith = func(set func(*config.Config)) luaShop {
		cfg := cfg
		set(&cfg)
		b := strategytest.Backends(t, s, cfg)
		l := lua.New(b.DB, b.Redis, lua.OptionsOf(cfg, order.Rules{Limit: cfg.PerUserLimit}))
		svc := order.NewService(b.DB, l.Placement(), nil)
		stop := sync.OnceFunc(svc.Close)
		t.Cleanup(stop) // before the backends close
		return luaShop{svc, l, stop}
	}
	f.new = func() luaShop { return f.newWith(func(*config.Config) {}) }
	return f
}

// redisAvailable reads the SKU's available from Redis; -1 with no state.
func (f luaFleet) redisAvailable(t *testing.T, sku string) int {
	t.Helper()
	st, err := f.stock.State(context.WithoutCancel(t.Context()), sku)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exists {
		return -1
	}
	return st.Available
}

// logged counts the reservations ever added to sku's log.
func (f luaFleet) logged(t *testing.T, sku string) int64 {
	t.Helper()
	info, err := f.rdb.XInfoStream(t.Context(), f.prefix+"lua:{"+sku+"}:log").Result()
	if err != nil {
		t.Fatal(err)
	}
	return info.EntriesAdded
}

// settled audits sku after one reconcile: every invariant holds, nothing
// is pending, and Redis has what the database has.
func (f luaFleet) settled(t *testing.T, shop luaShop, sku string, soldOut int, acked []int64) audit.Audit {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	if _, err := shop.lua.Reconcile(ctx, 0); err != nil {
		t.Fatal(err)
	}
	a, err := audit.SKU(ctx, f.gdb, sku, soldOut, acked)
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Violations(); len(v) > 0 {
		t.Errorf("invariants broken: %v", v)
	}
	st, err := f.stock.State(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exists || st.Available != a.Available || len(st.Log) != 0 {
		t.Errorf("redis: exists %v, available %d, %d pending; database available %d", st.Exists, st.Available, len(st.Log), a.Available)
	}
	return a
}

// place has n buyers, user-<i> with key k-<i>, buy one unit each at once,
// spread over shops; it returns the acknowledged ids, the sold-out count
// and the other errors.
func place(t *testing.T, sku string, n int, shops ...luaShop) (acked []int64, soldOut int, others []error) {
	t.Helper()
	return placeAs(t, "user", sku, n, shops...)
}

// placeAs is place with buyers named <who>-<i>.
func placeAs(t *testing.T, who, sku string, n int, shops ...luaShop) (acked []int64, soldOut int, others []error) {
	t.Helper()
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprint(who, "-", i)
	}
	return placeUsers(t, sku, users, shops...)
}

// placeUsers is place with one buyer of each name in users, buyer i with
// key k-<i>.
func placeUsers(t *testing.T, sku string, users []string, shops ...luaShop) (acked []int64, soldOut int, others []error) {
	t.Helper()
	requests := make([]order.PlaceRequest, len(users))
	for i, user := range users {
		requests[i] = order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: fmt.Sprint("k-", i)}
	}
	services := make([]*order.Service, len(shops))
	for i, s := range shops {
		services[i] = s.Service
	}
	return ordertest.PlaceAll(t.Context(), requests, nil, services...)
}

// TestLuaDatabaseRefuses: when Redis holds more stock than the database
// (here the database's stock is cut behind Redis's back, as a stale Redis
// would), the database's conditional UPDATE refuses the extra
// reservations: their buyers hear sold out, their units go back to Redis,
// and nothing is oversold. Redis is then set from the database.
func TestLuaDatabaseRefuses(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, nil)
	a, b := f.new(), f.new()
	const sku = "stale"
	if _, err := a.SetStock(t.Context(), sku, 20); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Place(t.Context(), order.PlaceRequest{SKU: sku, UserID: "first", Quantity: 1, IdempotencyKey: "first"}); err != nil {
		t.Fatal(err)
	}
	if err := f.gdb.Exec(`UPDATE stock_items SET available = 5, initial = 6 WHERE sku = ?`, sku).Error; err != nil {
		t.Fatal(err)
	}
	// The cut, recorded as the ledger would have it, so that the audit
	// below explains every unit.
	err := f.gdb.Exec(`INSERT INTO stock_movements (sku, delta, reason, reference, actor, created_at)
		VALUES (?, -14, 'correction', 'behind Redis', 'admin', CURRENT_TIMESTAMP)`, sku).Error
	if err != nil {
		t.Fatal(err)
	}
	if got := f.redisAvailable(t, sku); got != 19 {
		t.Fatalf("redis has %d, want 19 before the burst", got)
	}
	acked, soldOut, others := place(t, sku, 40, a, b)
	if len(others) > 0 {
		t.Fatalf("%d buyers failed; first: %v", len(others), others[0])
	}
	if len(acked) != 5 || soldOut != 35 {
		t.Errorf("%d bought, %d sold out; want 5 and 35", len(acked), soldOut)
	}
	f.settled(t, a, sku, soldOut, acked)
}

// TestLuaRetryTakesNoStock: a retry whose key already has an order gets
// that order without a reservation, so it never holds a unit that a new
// buyer then misses: first while Redis knows the key's order, then after
// Redis lost the SKU's keys and built its state again from a database that
// has orders.
func TestLuaRetryTakesNoStock(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, nil)
	shop := f.new()
	ctx := t.Context()
	const sku = "retry-no-stock"
	if _, err := shop.SetStock(ctx, sku, 3); err != nil {
		t.Fatal(err)
	}
	buy := func(user string) order.Order {
		t.Helper()
		o, replayed, err := shop.Place(ctx, order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: "k-" + user})
		if err != nil || replayed {
			t.Fatalf("%s: replayed %v, %v", user, replayed, err)
		}
		return o
	}
	retry := func(o order.Order, when string) {
		t.Helper()
		before := f.logged(t, sku)
		again, replayed, err := shop.Place(ctx, order.PlaceRequest{SKU: sku, UserID: o.UserID, Quantity: 1, IdempotencyKey: *o.IdempotencyKey})
		if err != nil || !replayed || again.ID != o.ID {
			t.Fatalf("retry %s: order %d, replayed %v, %v; want order %d replayed", when, again.ID, replayed, err, o.ID)
		}
		if n := f.logged(t, sku) - before; n != 0 {
			t.Errorf("retry %s: %d reservations made, want none", when, n)
		}
	}

	ann := buy("ann")
	retry(ann, "with Redis intact")
	keys, err := f.rdb.Keys(ctx, "*{"+sku+"}*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no keys of %s in Redis to delete: %v", sku, err)
	}
	if err := f.rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	buy("bob") // builds the state again
	retry(ann, "after Redis lost the SKU")
	if got := f.redisAvailable(t, sku); got != 1 {
		t.Errorf("redis has %d available, want 1", got)
	}
	f.settled(t, shop, sku, 0, []int64{ann.ID})
}

// TestLuaRefundOnce: many concurrent refunds of one order, on several
// instances, return its units once to the database and once to Redis,
// without a reconcile; the unit then sells again.
func TestLuaRefundOnce(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, func(cfg *config.Config) { cfg.PerUserLimit = 2 })
	a, b := f.new(), f.new()
	const sku = "refund"
	if _, err := a.SetStock(t.Context(), sku, 3); err != nil {
		t.Fatal(err)
	}
	o, _, err := a.Place(t.Context(), order.PlaceRequest{SKU: sku, UserID: "ann", Quantity: 2, IdempotencyKey: "buy"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	refunded := 0
	for i := range 20 {
		wg.Go(func() {
			_, _, err := []luaShop{a, b}[i%2].Refund(t.Context(), o.ID, "ann", fmt.Sprint("r-", i))
			if err == nil {
				mu.Lock()
				refunded++
				mu.Unlock()
			} else if !errors.Is(err, order.ErrAlreadyRefunded) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if refunded != 1 {
		t.Errorf("%d refunds succeeded, want 1", refunded)
	}
	if got := f.redisAvailable(t, sku); got != 3 {
		t.Errorf("redis has %d after the refund, want 3", got)
	}
	// The user's holding went back too: two more units are within the limit.
	again, _, err := b.Place(t.Context(), order.PlaceRequest{SKU: sku, UserID: "ann", Quantity: 2, IdempotencyKey: "buy-again"})
	if err != nil {
		t.Fatalf("buying again after the refund: %v", err)
	}
	f.settled(t, a, sku, 0, []int64{again.ID})
}

// TestLuaSameKeyOnce: concurrent requests under one key, on two
// instances, make one order and take one unit. While its reservation is
// being persisted, the others are told so (ErrInProgress), or replay the
// order once it is in the database; none takes a unit of its own.
func TestLuaSameKeyOnce(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, nil)
	a, b := f.new(), f.new()
	const sku = "twice"
	if _, err := a.SetStock(t.Context(), sku, 50); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ids := make([]int64, 20)
	gate := make(chan struct{})
	for i := range ids {
		wg.Go(func() {
			<-gate
			o, _, err := []luaShop{a, b}[i%2].Place(t.Context(), order.PlaceRequest{SKU: sku, UserID: "ann", Quantity: 1, IdempotencyKey: "double-click"})
			if err != nil && !errors.Is(err, idempotency.ErrInProgress) {
				t.Error(err)
			}
			ids[i] = o.ID
		})
	}
	close(gate)
	wg.Wait()
	made := slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return id == 0 })
	if len(made) == 0 || slices.ContainsFunc(made, func(id int64) bool { return id != made[0] }) {
		t.Fatalf("want one order for one key, got %v", ids)
	}
	if got := f.redisAvailable(t, sku); got != 49 {
		t.Errorf("redis has %d, want 49: one unit taken", got)
	}
	f.settled(t, a, sku, 0, made[:1])
}

// TestLuaOnRedisCluster: lua on a Redis Cluster of three masters, three
// instances: bursts on SKUs whose keys land on different masters sell
// exactly their stock, a refund reaches Redis once, and a reconcile leaves
// Redis equal to the database; the script that reserves claims each
// buyer's Idempotency-Key (keysClaimed). Every key a script touches must
// share its SKU's slot; a key outside it fails with CROSSSLOT.
func TestLuaOnRedisCluster(t *testing.T) {
	t.Parallel()
	cluster := strings.Join(testinfra.StartRedisCluster(t), ",")
	masters := map[string]bool{}
	for _, sku := range []string{"apple", "banana", "cherry", "damson", "elder"} {
		// A database each: the buyers' names and keys are the same.
		f := newLuaFleet(t, func(cfg *config.Config) { cfg.RedisAddr, cfg.RedisPrefix, cfg.PerUserLimit = cluster, "shop:", 1 })
		rdb, ok := f.rdb.(*redis.ClusterClient)
		if !ok {
			t.Fatalf("the shop's client of %s is a %T, not a cluster's", cluster, f.rdb)
		}
		shops := []luaShop{f.new(), f.new(), f.new()}
		if _, err := shops[0].SetStock(t.Context(), sku, ordertest.Units); err != nil {
			t.Fatal(err)
		}
		acked, soldOut, others := place(t, sku, ordertest.Buyers, shops...)
		if len(others) > 0 {
			t.Fatalf("%s: %d buyers failed; first: %v", sku, len(others), others[0])
		}
		if len(acked) != ordertest.Units || soldOut != ordertest.Buyers-ordertest.Units {
			t.Errorf("%s: %d sold, %d sold out; want %d and %d", sku, len(acked), soldOut, ordertest.Units, ordertest.Buyers-ordertest.Units)
		}
		var buyer string
		if err := f.gdb.Raw(`SELECT user_id FROM orders WHERE id = ?`, acked[0]).Scan(&buyer).Error; err != nil {
			t.Fatal(err)
		}
		o, _, err := shops[1].Refund(t.Context(), acked[0], buyer, "refund-"+sku)
		if err != nil {
			t.Fatalf("%s: refund: %v", sku, err)
		}
		if got := f.redisAvailable(t, sku); got != o.Quantity {
			t.Errorf("%s: redis has %d after the refund, want %d", sku, got, o.Quantity)
		}
		// The refunded unit is for sale again: no buyer was turned away
		// since.
		if a := f.settled(t, shops[2], sku, 0, acked[1:]); a.Sold != ordertest.Units-1 {
			t.Errorf("%s: %d sold after one refund, want %d", sku, a.Sold, ordertest.Units-1)
		}
		node, err := rdb.MasterForKey(t.Context(), "{"+sku+"}")
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Errorf("every SKU landed on one master (%v): the test shows nothing of the cluster", masters)
	}
	f := newLuaFleet(t, func(cfg *config.Config) { cfg.RedisAddr, cfg.RedisPrefix, cfg.PerUserLimit = cluster, "shop:", 1 })
	keysClaimed(t, f, "fig", f.new(), f.new())
}
