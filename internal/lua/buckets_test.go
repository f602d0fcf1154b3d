package lua_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stockguard/shop/internal/lua/redisstock"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/lua"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/testinfra"
)

const buckets = 6

// bucketFleet is a lua fleet on a Redis Cluster of three masters of its
// own, each SKU's stock split into 6 buckets.
func bucketFleet(t *testing.T) luaFleet {
	t.Helper()
	cluster := strings.Join(testinfra.StartRedisCluster(t), ",")
	return newLuaFleet(t, func(cfg *config.Config) {
		cfg.RedisAddr, cfg.RedisPrefix, cfg.SKUBuckets = cluster, "shop:", buckets
	})
}

// inBuckets sums sku's available and pending over its buckets.
func (f luaFleet) inBuckets(t *testing.T, sku string) (available, pending int) {
	t.Helper()
	for b := range buckets {
		st, err := f.stock.State(context.WithoutCancel(t.Context()), redisstock.BucketOf(sku, b))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Exists {
			t.Errorf("%s: bucket %d has no state", sku, b)
		}
		available += st.Available
		pending += len(st.Log)
	}
	return available, pending
}

// scripts counts the scripts each master of the cluster has run.
func scripts(t *testing.T, rdb redis.UniversalClient) map[string]int {
	t.Helper()
	var mu sync.Mutex
	calls := map[string]int{}
	err := rdb.(*redis.ClusterClient).ForEachMaster(t.Context(), func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		n := 0
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
				n, _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			}
		}
		mu.Lock()
		calls[m.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// sellInBuckets sells 300 units of sku to the buyers named users over 3
// shops, and checks: exactly the stock sold, none left, no buyer failed
// (one told busy asks again, as a client does),
// the audit clean; after one reconcile, Redis's buckets together hold what
// the database has, with nothing pending; and the reservation script ran
// on every master.
func sellInBuckets(t *testing.T, f luaFleet, sku string, users []string, during func(acked chan<- int64)) {
	t.Helper()
	const units = 300
	shops := []luaShop{f.new(), f.new(), f.new()}
	if _, err := shops[0].SetStock(t.Context(), sku, units); err != nil {
		t.Fatal(err)
	}
	before := scripts(t, f.rdb)
	// Buyers told busy ask again with their keys: on a loaded machine, some
	// of a thousand at once wait past a Redis pipeline's 5 s, which is
	// not what this test is about.
	requests := make([]order.PlaceRequest, len(users))
	for i, user := range users {
		requests[i] = order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: fmt.Sprint("k-", i)}
	}
	acked, soldOut, others := ordertest.PlaceAsClients(t.Context(), requests, nil, shops[0].Service, shops[1].Service, shops[2].Service)
	if len(others) > 0 {
		t.Fatalf("%d buyers failed; first: %v", len(others), others[0])
	}
	if _, err := shops[0].lua.Reconcile(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	a, err := audit.SKU(t.Context(), f.gdb, sku, soldOut, acked)
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Violations(); len(v) > 0 || a.Sold != units || a.Available != 0 {
		t.Errorf("%s: %+v %v; want %d sold, none left (undersold would show buyers turned away from a bucket while another held stock)", sku, a, v, units)
	}
	if available, pending := f.inBuckets(t, sku); available != a.Available || pending != 0 {
		t.Errorf("%s: the buckets hold %d, %d pending; the database %d", sku, available, pending, a.Available)
	}
	after := scripts(t, f.rdb)
	for m, n := range after {
		if n <= before[m] {
			t.Errorf("master %s ran no script for %s (%d calls before and after): the buckets did not spread", m, sku, n)
		}
	}
}

// TestBucketsOnRedisCluster: lua with each SKU's stock split into 6
// buckets on a 3-master Redis Cluster, 3 instances, 1,000 buyers of 300
// units, all at once: buyers spread over every bucket, and buyers whose home bucket is
// one and the same, who find it empty after its share and buy from the
// others. Each sells exactly its stock, no buyer is told sold out while a
// bucket holds stock, the reservation script runs on every master, and
// after one reconcile Redis's buckets together equal the database.
func TestBucketsOnRedisCluster(t *testing.T) {
	t.Parallel()
	f := bucketFleet(t)
	spread := make([]string, 1000)
	for i := range spread {
		spread[i] = fmt.Sprint("user-", i)
	}
	sellInBuckets(t, f, "spread", spread, nil)

	probe := f.new()
	home := lua.Home(probe.lua, "one-home", "u-0")
	var one []string
	for i := 0; len(one) < len(spread); i++ {
		if u := fmt.Sprint("u-", i); lua.Home(probe.lua, "one-home", u) == home {
			one = append(one, u)
		}
	}
	sellInBuckets(t, f, "one-home", one, nil)
}

// TestBucketsRefundsAndGather: refunds during a sale over buckets put their
// units back, where later buyers find them; and a stock too small to
// spread gathers in the fewest buckets that hold at least 16 units each,
// so the last units are not one per bucket.
func TestBucketsRefundsAndGather(t *testing.T) {
	t.Parallel()
	f := bucketFleet(t)
	shops := []luaShop{f.new(), f.new()}
	const sku = "refunds"
	if _, err := shops[0].SetStock(t.Context(), sku, 20); err != nil {
		t.Fatal(err)
	}
	if _, err := shops[0].lua.Reconcile(t.Context(), 0); err != nil { // builds the buckets
		t.Fatal(err)
	}
	var held []int
	for b := range buckets {
		st, err := f.stock.State(t.Context(), redisstock.BucketOf(sku, b))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, st.Available)
	}
	if fmt.Sprint(held) != "[16 4 0 0 0 0]" {
		t.Errorf("20 units over 6 buckets: %v, want [16 4 0 0 0 0]", held)
	}
	acked, _, others := placeAs(t, "first", sku, 20, shops...)
	if len(others) > 0 || len(acked) != 20 {
		t.Fatalf("%d sold of 20, %v", len(acked), others)
	}
	for i, id := range acked[:5] {
		var user string
		if err := f.gdb.Raw(`SELECT user_id FROM orders WHERE id = ?`, id).Scan(&user).Error; err != nil {
			t.Fatal(err)
		}
		if _, _, err := shops[i%2].Refund(t.Context(), id, user, fmt.Sprint("r-", i)); err != nil {
			t.Fatal(err)
		}
	}
	again, soldOut, others := placeAs(t, "second", sku, 40, shops...)
	if len(others) > 0 || len(again) != 5 || soldOut != 35 {
		t.Errorf("after 5 refunds: %d sold, %d sold out, %v; want 5 and 35", len(again), soldOut, others)
	}
	if _, err := shops[1].lua.Reconcile(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if available, pending := f.inBuckets(t, sku); available != 0 || pending != 0 {
		t.Errorf("the buckets hold %d, %d pending, after the sale; want none", available, pending)
	}
}
