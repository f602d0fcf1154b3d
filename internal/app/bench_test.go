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

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// BenchmarkOrder places one order at a time through the shop's handler, in
// process and without a network, under every strategy on real MySQL and
// Redis: the strategy's take of the stock and the order insert, plus the
// API and its Idempotency-Key. Buyers never contend for long: this is the
// cost of one order, where `shop bench` measures a burst.
func BenchmarkOrder(b *testing.B) {
	testinfra.NeedsRealServers(b, "it measures the strategies on MySQL and Redis")
	for _, s := range strategy.All() {
		env := strategytest.Env(b, s)
		env["SHOP_ADMIN_TOKEN"] = "bench"
		shop, err := app.New(b.Context(), strategytest.Load(b, env), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { shop.Close() })
		sku := "bench-" + s.Name
		serve(b, shop.Handler, "PUT", "/api/v1/stock/"+sku, `{"quantity":1000000000}`, http.StatusOK, "Authorization", "Bearer bench")
		b.Run(s.Name, func(b *testing.B) {
			run := rand.Text()[:8] // users and keys are new in every round
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					user := fmt.Sprint(run, "-", n.Add(1))
					serve(b, shop.Handler, "POST", "/api/v1/orders", fmt.Sprintf(`{"sku":%q,"user_id":%q,"quantity":1}`, sku, user),
						http.StatusCreated, "Idempotency-Key", user)
				}
			})
		})
	}
}

func serve(b *testing.B, h http.Handler, method, path, body string, want int, header ...string) {
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
