package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/lua/redisstock"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// fleet is three `shop serve` processes of one strategy on one database
// and Redis namespace, with direct handles on both for the checks.
type fleet struct {
	bases  []string
	db     *gorm.DB
	redis  *redis.Client
	prefix string
}

// newFleet starts three shops of strategy, on servers of the test's own,
// with env added. The reconcile job of lua waits an hour: whatever Redis
// agrees with, it agrees with by itself.
func newFleet(t *testing.T, name string, env ...string) *fleet {
	t.Helper()
	s, err := strategy.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	vars := strategytest.Env(t, s)
	vars["SHOP_ADMIN_TOKEN"], vars["SHOP_RECONCILE_INTERVAL"] = "secret", "1h"
	f := &fleet{db: testinfra.ShopDB(t, vars["SHOP_MYSQL_DSN"]), redis: redis.NewClient(&redis.Options{Addr: vars["SHOP_REDIS_ADDR"]}), prefix: vars["SHOP_REDIS_PREFIX"]}
	t.Cleanup(func() { f.redis.Close() })
	for range 3 {
		base, _ := shoptest.Start(t, append(strategytest.Environ(vars), env...)...)
		f.bases = append(f.bases, base)
	}
	return f
}

// putStock sets sku's stock to quantity through shop i, and returns the
// stock it answers.
func (f *fleet) putStock(t *testing.T, i int, sku string, quantity int) stockJSON {
	t.Helper()
	code, body := shoptest.Send(t, "PUT", f.bases[i]+"/api/v1/stock/"+sku, fmt.Sprintf(`{"quantity":%d}`, quantity), "Authorization", "Bearer secret")
	var s stockJSON
	if code != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("put stock %s %d: %d %s", sku, quantity, code, body)
	}
	return s
}

type stockJSON struct {
	Initial, Available, Sold int
}

// sell has buyers first to first+n-1 buy one unit of sku each, at once,
// spread over the shops. A buyer told busy or in progress asks again with
// its key, on the next shop, as a client should. It returns the ids of the
// orders made and how many buyers were told sold out.
func (f *fleet) sell(t *testing.T, sku string, first, n int) (acked []int64, soldOut int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := first; i < first+n; i++ {
		wg.Go(func() {
			<-gate
			key, body := fmt.Sprint("k", i), fmt.Sprintf(`{"sku":%q,"user_id":"u%d","quantity":1}`, sku, i)
			for attempt := 0; ; attempt++ {
				r, err := shoptest.Post(ctx, http.DefaultClient, f.bases[(i+attempt)%len(f.bases)]+"/api/v1/orders", key, body)
				mu.Lock()
				switch {
				case err == nil && r.Code == http.StatusCreated:
					acked = append(acked, r.ID)
				case err == nil && r.Type == "sold-out":
					soldOut++
				case err == nil && (r.Code == http.StatusServiceUnavailable || r.Type == "request-in-progress"):
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				default:
					t.Errorf("buyer %d: %+v %v", i, r, err)
				}
				mu.Unlock()
				return
			}
		})
	}
	close(gate)
	wg.Wait()
	return acked, soldOut
}

// redisState reads lua's Redis state of sku.
func (f *fleet) redisState(t *testing.T, sku string) redisstock.State {
	t.Helper()
	st, err := redisstock.New(f.redis, f.prefix).State(t.Context(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// epoch reads lua's epoch of sku from gdb; 0 for none.
func epoch(t *testing.T, gdb *gorm.DB, sku string) int64 {
	t.Helper()
	var e int64
	if err := gdb.Raw(`SELECT COALESCE(MAX(epoch), 0) FROM stock_epochs WHERE sku = ?`, sku).Row().Scan(&e); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestStockChangeKeepsOrders: under every guarded strategy, on three
// shops, 30 of a SKU's 50 units sell, the SKU's stock is set to 40, and it
// sells out. Every order is kept: 70 units are sold in all, none is left,
// initial is 70, and the audit holds. A lock strategy's fence does not go
// back; under lua, Redis has the database's stock right after the change,
// with no reconcile, in the same epoch.
func TestStockChangeKeepsOrders(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"atomic", "pessimistic", "optimistic", "batched", "lua", "redis", "redlock", "zookeeper", "etcd", "dbtable"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFleet(t, name)
			const sku = "restock"
			f.putStock(t, 0, sku, 50)
			first, soldOut := f.sell(t, sku, 0, 30)
			if len(first) != 30 || soldOut != 0 {
				t.Fatalf("%d of 30 buyers bought, %d told sold out", len(first), soldOut)
			}
			before, err := stock.Get(t.Context(), f.db, sku)
			if err != nil {
				t.Fatal(err)
			}
			was := epoch(t, f.db, sku)

			if s := f.putStock(t, 1, sku, 40); s != (stockJSON{Initial: 70, Available: 40, Sold: 30}) {
				t.Errorf("PUT 40 answered %+v, want initial 70, available 40, sold 30", s)
			}
			after, err := stock.Get(t.Context(), f.db, sku)
			if err != nil {
				t.Fatal(err)
			}
			if after.Fence < before.Fence {
				t.Errorf("the change took the fence back from %d to %d", before.Fence, after.Fence)
			}
			if name == "lua" {
				if st, now := f.redisState(t, sku), epoch(t, f.db, sku); !st.Exists || st.Available != after.Available || st.Epoch != was || now != was {
					t.Errorf("right after the change Redis has %+v, the database %d available in epoch %d (%d before)", st, after.Available, now, was)
				}
			}

			rest, soldOut := f.sell(t, sku, 30, 60)
			if len(rest) != 40 || soldOut != 20 {
				t.Errorf("after the change %d of 60 buyers bought and %d were told sold out, want 40 and 20", len(rest), soldOut)
			}
			a, err := audit.SKU(t.Context(), f.db, sku, soldOut, append(first, rest...))
			if err != nil {
				t.Fatal(err)
			}
			if v := a.Violations(); len(v) > 0 {
				t.Errorf("invariants broken: %v", v)
			}
			if a.Orders != 70 || a.Sold != 70 || a.Available != 0 || a.Initial != 70 {
				t.Errorf("audit %+v, want 70 orders, 70 sold, 0 available, initial 70", a)
			}
			if name == "lua" {
				if st := f.redisState(t, sku); st.Available != a.Available {
					t.Errorf("after the sale Redis has %+v, the database %d available", st, a.Available)
				}
			}
		})
	}
}

// TestDeleteStockNeedsAllowReset: a shop without SHOP_ALLOW_RESET=true
// refuses DELETE with 403, and the SKU, its orders, its buyers' holdings
// and lua's Redis state stay. A shop with it deletes them all, moves the
// epoch on, and the SKU set up again sells from nothing.
func TestDeleteStockNeedsAllowReset(t *testing.T) {
	t.Parallel()
	s := newShop(t, "SHOP_STRATEGY=lua", "SHOP_PER_USER_LIMIT=2", "SHOP_RECONCILE_INTERVAL=1h")
	allowing, _ := shoptest.Start(t, "SHOP_MYSQL_DSN="+s.dsn, "SHOP_REDIS_ADDR="+s.redis.Options().Addr, "SHOP_REDIS_PREFIX="+s.prefix,
		"SHOP_ADMIN_TOKEN=secret", "SHOP_STRATEGY=lua", "SHOP_PER_USER_LIMIT=2", "SHOP_RECONCILE_INTERVAL=1h", "SHOP_ALLOW_RESET=true")
	const sku = "doomed"
	s.putStock(t, sku, 10)
	var acked []int64
	for i := range 3 {
		r, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", fmt.Sprint("k", i), fmt.Sprintf(`{"sku":%q,"user_id":"u%d","quantity":2}`, sku, i))
		if err != nil || r.Code != http.StatusCreated {
			t.Fatalf("order %d: %+v %v", i, r, err)
		}
		acked = append(acked, r.ID)
	}
	left := func() (rows map[string]int, keys []string) {
		t.Helper()
		rows = map[string]int{}
		for _, table := range []string{"stock_items", "stock_movements", "orders", "user_purchases"} {
			var n int
			if err := s.db.Raw(`SELECT COUNT(*) FROM `+table+` WHERE sku = ?`, sku).Row().Scan(&n); err != nil {
				t.Fatal(err)
			}
			rows[table] = n
		}
		all, err := s.redis.Keys(t.Context(), s.prefix+"lua:{"+sku+"}:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range all {
			// The reconcile job's fence stays, as it must: a stale run's
			// token must never pass it again.
			if !strings.HasSuffix(k, ":fence") {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		return rows, keys
	}
	rows, keys := left()
	before := epoch(t, s.db, sku)

	code, body := shoptest.Send(t, "DELETE", s.base+"/api/v1/stock/"+sku, "", "Authorization", "Bearer secret")
	if code != http.StatusForbidden || !strings.Contains(body, `"type":"forbidden"`) || !strings.Contains(body, "SHOP_ALLOW_RESET") {
		t.Errorf("DELETE without SHOP_ALLOW_RESET: %d %s, want 403 forbidden naming SHOP_ALLOW_RESET", code, body)
	}
	if again, againKeys := left(); fmt.Sprint(again, againKeys) != fmt.Sprint(rows, keys) || rows["orders"] != 3 || rows["user_purchases"] != 3 || len(keys) == 0 || epoch(t, s.db, sku) != before {
		t.Errorf("after the refused DELETE: %v, Redis %v, epoch %d; want %v, Redis %v, epoch %d", again, againKeys, epoch(t, s.db, sku), rows, keys, before)
	}
	s.audit(t, sku, 0, acked)

	if code, body := shoptest.Send(t, "DELETE", allowing+"/api/v1/stock/"+sku, "", "Authorization", "Bearer secret"); code != http.StatusNoContent {
		t.Fatalf("DELETE with SHOP_ALLOW_RESET=true: %d %s", code, body)
	}
	if rows, keys := left(); rows["stock_items"]+rows["stock_movements"]+rows["orders"]+rows["user_purchases"] != 0 || len(keys) != 0 || epoch(t, s.db, sku) <= before {
		t.Errorf("after the DELETE: %v, Redis %v, epoch %d; want nothing left, and an epoch past %d", rows, keys, epoch(t, s.db, sku), before)
	}
	if code, body := shoptest.Send(t, "GET", s.base+"/api/v1/stock/"+sku, ""); code != http.StatusNotFound {
		t.Errorf("GET after the DELETE: %d %s, want 404", code, body)
	}

	// Set up again, the SKU sells from nothing: the same buyers buy again,
	// within a limit that no longer counts their old orders.
	s.putStock(t, sku, 6)
	acked = acked[:0]
	for i := range 3 {
		r, err := shoptest.Post(t.Context(), http.DefaultClient, allowing+"/api/v1/orders", fmt.Sprint("again-", i), fmt.Sprintf(`{"sku":%q,"user_id":"u%d","quantity":2}`, sku, i))
		if err != nil || r.Code != http.StatusCreated || r.Replayed {
			t.Fatalf("order %d on the SKU set up again: %+v %v", i, r, err)
		}
		acked = append(acked, r.ID)
	}
	if a := s.audit(t, sku, 0, acked); a.Orders != 3 || a.Available != 0 || a.Initial != 6 {
		t.Errorf("the SKU set up again: %+v, want 3 orders, 0 left of 6", a)
	}
}
