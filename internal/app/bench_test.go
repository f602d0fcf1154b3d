package app_test

import (
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/testinfra"
)

// servers starts, for a strategy's needs, the servers beyond MySQL and
// returns the SHOP_* settings that name them.
var servers = map[string]func(b *testing.B) map[string]string{
	"zookeeper": func(b *testing.B) map[string]string {
		zk := testinfra.ZooKeeper(b)
		return map[string]string{"SHOP_ZK_ADDRS": strings.Join(zk.Addrs, ","), "SHOP_ZK_ROOT": zk.Root}
	},
	"redlock": func(b *testing.B) map[string]string {
		var addrs []string
		for range 3 { // independent masters: private servers
			addrs = append(addrs, testinfra.StartRedis(b).Addr())
		}
		return map[string]string{"SHOP_REDLOCK_ADDRS": strings.Join(addrs, ",")}
	},
}

// BenchmarkOrder places one order at a time through the shop's handler, in
// process and without a network, under every strategy on real MySQL and
// Redis: the strategy's take of the stock and the order insert, plus the
// API and its Idempotency-Key. Buyers never contend for long: this is the
// cost of one order, where `shop bench` measures a burst.
func BenchmarkOrder(b *testing.B) {
	redis := testinfra.Redis(b)
	dsn := testinfra.MySQL(b)
	for _, s := range app.Strategies {
		env := map[string]string{"SHOP_MYSQL_DSN": dsn, "SHOP_REDIS_ADDR": redis.Addr, "SHOP_REDIS_PREFIX": redis.Prefix,
			"SHOP_STRATEGY": s.Name, "SHOP_ADMIN_TOKEN": "bench", "SHOP_DEBUG_ADDR": "127.0.0.1:0"}
		for _, need := range s.Needs {
			if start, ok := servers[need]; ok {
				maps.Copy(env, start(b))
			}
		}
		cfg, err := config.Load(nil, func(k string) string { return env[k] }, app.Names(), io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		shop, err := app.New(b.Context(), cfg, slog.New(slog.DiscardHandler))
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
