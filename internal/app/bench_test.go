package app_test

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// benchBuyers is how many buyers per core order at once: enough for the
// group commit of batched and lua to gather batches, as a flash sale does.
const benchBuyers = 32

// BenchmarkOrder places orders through the shop's handler, in process and
// without a network, under every strategy on real MySQL and Redis, and
// through http-echo, the same HTTP stack with no backends. Each order is
// new: its own buyer and Idempotency-Key. Besides the time and the
// allocations per order, it reports cpu-ns/op, this process's CPU time
// per order, which a loaded machine disturbs far less than the time:
// what the shop's own code costs an order, the servers' share aside.
func BenchmarkOrder(b *testing.B) {
	testinfra.NeedsRealServers(b, "it measures the strategies on MySQL and Redis")
	b.Run("http-echo", func(b *testing.B) { orders(b, httpapi.Echo(), one("echo"), http.StatusCreated) })
	for _, s := range strategy.All() {
		b.Run(s.Name, func(b *testing.B) {
			orders(b, shopOf(b, s, 1000000000, "bench-"+s.Name), one("bench-"+s.Name), http.StatusCreated)
		})
	}
}

// BenchmarkRefusal is BenchmarkOrder on a SKU that is sold out: every
// buyer is refused, as nearly every buyer of a flash sale is. Each
// strategy's first refusals ask it; the next are answered from the
// instance's sold-out lease (internal/order/soldout.go).
func BenchmarkRefusal(b *testing.B) {
	testinfra.NeedsRealServers(b, "it measures the strategies on MySQL and Redis")
	b.Run("http-echo", func(b *testing.B) { orders(b, httpapi.Echo(), one("echo"), http.StatusCreated) })
	for _, s := range strategy.All() {
		b.Run(s.Name, func(b *testing.B) {
			h := shopOf(b, s, 0, "refused-"+s.Name)
			leased := testutil.ToFloat64(metrics.SoldOutLeaseAnswers)
			orders(b, h, one("refused-"+s.Name), http.StatusConflict)
			b.ReportMetric((testutil.ToFloat64(metrics.SoldOutLeaseAnswers)-leased)/float64(b.N), "leased/op")
		})
	}
}

// BenchmarkCart is BenchmarkOrder for carts of 3 lines, a unit each of 3
// SKUs, under atomic (one transaction), batched (in batches of carts) and
// lua (one script on one Redis, then in batches of carts).
func BenchmarkCart(b *testing.B) {
	testinfra.NeedsRealServers(b, "it measures the strategies on MySQL and Redis")
	for _, name := range []string{"atomic", "batched", "lua"} {
		b.Run(name, func(b *testing.B) {
			s, err := strategy.Lookup(name)
			if err != nil {
				b.Fatal(err)
			}
			skus := []string{"cart-" + name + "-a", "cart-" + name + "-b", "cart-" + name + "-c"}
			h := shopOf(b, s, 1000000000, skus...)
			orders(b, h, func(user string) string {
				return fmt.Sprintf(`{"user_id":%q,"items":[{"sku":%q,"quantity":1},{"sku":%q,"quantity":1},{"sku":%q,"quantity":1}]}`,
					user, skus[2], skus[0], skus[1])
			}, http.StatusCreated)
		})
	}
}

// shopOf starts a shop of strategy s, in process, with units of each of
// skus, and returns its handler.
func shopOf(b *testing.B, s strategy.Strategy, units int, skus ...string) http.Handler {
	env := strategytest.Env(b, s)
	env["SHOP_ADMIN_TOKEN"] = "bench"
	shop, err := app.New(b.Context(), strategytest.Load(b, env), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { shop.Close() })
	for _, sku := range skus {
		serve(b, shop.Handler, "PUT", "/api/v1/stock/"+sku, fmt.Sprintf(`{"quantity":%d}`, units), http.StatusOK, "Authorization", "Bearer bench")
	}
	return shop.Handler
}

// one is the body of a user's order of one unit of sku.
func one(sku string) func(user string) string {
	return func(user string) string { return fmt.Sprintf(`{"sku":%q,"user_id":%q,"quantity":1}`, sku, user) }
}

// orders places b.N orders through h, each with the body that body gives
// its user, benchBuyers per core at once, each answered want.
func orders(b *testing.B, h http.Handler, body func(user string) string, want int) {
	run := rand.Text()[:8] // users and keys are new in every round
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(benchBuyers)
	b.ResetTimer()
	cpu := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			user := fmt.Sprint(run, "-", n.Add(1))
			serve(b, h, "POST", "/api/v1/orders", body(user), want, "Idempotency-Key", user)
		}
	})
	b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func serve(b testing.TB, h http.Handler, method, path, body string, want int, header ...string) {
	req := httptest.NewRequestWithContext(b.Context(), method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Errorf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
}
