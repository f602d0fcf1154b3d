package app_test

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestCloseLeavesNoGoroutine opens a shop on each strategy, sells through
// it an order of one SKU and a cart, so that whatever it runs in the
// background starts, and closes it: no goroutine that it started is left.
// The subtests run one at a time, since each compares the process's
// goroutines before and after.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	for _, s := range strategy.All() {
		t.Run(s.Name, func(t *testing.T) {
			env := strategytest.Env(t, s)
			env["SHOP_ADMIN_TOKEN"] = "leak"
			cfg := strategytest.Load(t, env)
			before := goleak.IgnoreCurrent()
			shop, err := app.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			for _, sku := range []string{"leak-a", "leak-b"} {
				serve(t, shop.Handler, "PUT", "/api/v1/stock/"+sku, `{"quantity":10}`, http.StatusOK, "Authorization", "Bearer leak")
			}
			serve(t, shop.Handler, "POST", "/api/v1/orders", one("leak-a")("ann"), http.StatusCreated, "Idempotency-Key", "ann")
			serve(t, shop.Handler, "POST", "/api/v1/orders", `{"user_id":"bob","items":[{"sku":"leak-a","quantity":1},{"sku":"leak-b","quantity":1}]}`,
				http.StatusCreated, "Idempotency-Key", "bob")
			if err := shop.Close(); err != nil {
				t.Fatal(err)
			}
			goleak.VerifyNone(t, before)
		})
	}
}

// TestFaultLeavesNoGoroutine closes a shop after a fault, and finds no
// goroutine that it started left: Redis killed under the pipelines of a
// burst of lua's orders; a shop closed in the middle of a burst; and the
// ZooKeeper session of the zookeeper strategy replaced, after its server
// came back without its data. One at a time, as TestCloseLeavesNoGoroutine.
func TestFaultLeavesNoGoroutine(t *testing.T) {
	// A restarted server's process is waited for by a goroutine of testinfra.
	server := goleak.IgnoreAnyFunction(testinfra.ServerWaiter)
	t.Run("redis-killed", func(t *testing.T) {
		srv := testinfra.StartRedis(t)
		shop, before := leakShop(t, "lua", map[string]string{"SHOP_REDIS_ADDR": srv.Addr()})
		burst(shop.Handler, "r", srv.Kill)
		closeShop(t, shop)
		// go-redis's pool redials a dead server in the background, once a
		// second, and sees that its client is closed only when it wakes.
		for range 30 {
			if goleak.Find(before, server) == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		goleak.VerifyNone(t, before, server)
	})
	for _, name := range []string{"atomic", "batched", "lua"} {
		t.Run("closed-mid-burst/"+name, func(t *testing.T) {
			shop, before := leakShop(t, name, nil)
			burst(shop.Handler, "c", func() { closeShop(t, shop) })
			goleak.VerifyNone(t, before)
		})
	}
	t.Run("zookeeper-replaced", func(t *testing.T) {
		srv := testinfra.StartZooKeeper(t)
		shop, before := leakShop(t, "zookeeper", map[string]string{"SHOP_ZK_ADDRS": srv.Addr(), "SHOP_ZK_ROOT": "/locks"})
		burst(shop.Handler, "z", func() { srv.Kill(); srv.Empty(); srv.Start() })
		testinfra.WaitFor(t, "an order on the new ZooKeeper session", func() bool {
			return order(shop.Handler, "z-after") == http.StatusCreated
		})
		closeShop(t, shop)
		goleak.VerifyNone(t, before, server)
	})
}

// leakShop opens a shop of strategy name with env's settings added, with
// stock of SKU leak, and returns it with the goroutines that ran before it.
func leakShop(t *testing.T, name string, env map[string]string) (*app.App, goleak.Option) {
	t.Helper()
	s, err := strategy.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	e := strategytest.Env(t, s)
	e["SHOP_ADMIN_TOKEN"] = "leak"
	maps.Copy(e, env)
	cfg := strategytest.Load(t, e)
	before := goleak.IgnoreCurrent()
	shop, err := app.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, shop.Handler, "PUT", "/api/v1/stock/leak", `{"quantity":1000}`, http.StatusOK, "Authorization", "Bearer leak")
	return shop, before
}

// burst places 40 orders at once, each of its own buyer, and runs fault
// once half of them have started; the answers do not matter.
func burst(h http.Handler, prefix string, fault func()) {
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { order(h, fmt.Sprintf("%s-%d", prefix, i)) })
		if i == n/2 {
			fault()
		}
	}
	wg.Wait()
}

// order places user's order of a unit of SKU leak, and returns its status.
func order(h http.Handler, user string) int {
	req := httptest.NewRequest("POST", "/api/v1/orders", strings.NewReader(one("leak")(user)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", user)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func closeShop(t *testing.T, shop *app.App) {
	t.Helper()
	if err := shop.Close(); err != nil {
		t.Logf("close: %v", err)
	}
}
