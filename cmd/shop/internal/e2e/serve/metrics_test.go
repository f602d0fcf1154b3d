package serve

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestMetrics places orders through real `shop serve` processes, one of
// them twice with its key, then scrapes /metrics on their debug listeners:
// the request, order, idempotency, lock and group-commit metrics moved by
// exactly what the orders did.
func TestMetrics(t *testing.T) {
	t.Parallel()
	dsn := testinfra.MySQL(t)
	redis := testinfra.Redis(t)
	for _, tc := range []struct {
		strategy string
		want     map[string]float64 // series: value after the orders
	}{
		{"redis", map[string]float64{
			`shop_orders_total{outcome="created",strategy="redis"}`:                                          orders,
			`shop_orders_total{outcome="replayed",strategy="redis"}`:                                         1,
			`shop_idempotency_total{result="replayed"}`:                                                      1,
			`shop_http_request_duration_seconds_count{method="POST",route="/api/v1/orders",status="201"}`:    orders + 1,
			`shop_http_request_duration_seconds_count{method="PUT",route="/api/v1/stock/:sku",status="200"}`: 1,
			// One acquisition per sale, each released.
			`shop_lock_acquire_seconds_count{backend="redis"}`: orders,
			`shop_lock_hold_seconds_count{backend="redis"}`:    orders,
			`shop_lock_leases_lost_total{backend="redis"}`:     0,
			`shop_fence_refusals_total`:                        0,
			// One at a time: each buyer's first read is its own, and the
			// second click's read finds its order.
			`shop_first_read_buyers_count`: orders + 1,
			`shop_first_read_buyers_sum`:   orders + 1,
		}},
		{"batched", map[string]float64{
			`shop_orders_total{outcome="created",strategy="batched"}`:  orders,
			`shop_orders_total{outcome="replayed",strategy="batched"}`: 1,
			// One at a time: a batch of one buyer each.
			`shop_batch_size_count{strategy="batched"}`:           orders,
			`shop_batch_size_sum{strategy="batched"}`:             orders,
			`shop_batch_commit_seconds_count{strategy="batched"}`: orders,
		}},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			// The relay's job takes its lock on the same Redis, counted under
			// the same backend: it waits an hour here, so that the counts are
			// the orders'.
			addrs, _ := shoptest.Serve(t, "--debug=127.0.0.1:0", []string{"SHOP_MYSQL_DSN=" + dsn, "SHOP_REDIS_ADDR=" + redis.Addr,
				"SHOP_REDIS_PREFIX=" + redis.Prefix + tc.strategy + ":", "SHOP_ADMIN_TOKEN=secret", "SHOP_STRATEGY=" + tc.strategy,
				"SHOP_RELAY_INTERVAL=1h"})
			base, debug := "http://"+addrs[0], "http://"+addrs[1]
			sku := "metrics-" + tc.strategy
			if code, body := shoptest.Send(t, "PUT", base+"/api/v1/stock/"+sku, `{"quantity":10}`, "Authorization", "Bearer secret"); code != http.StatusOK {
				t.Fatalf("put stock: %d %s", code, body)
			}
			for i := range orders {
				body := fmt.Sprintf(`{"sku":%q,"user_id":"%s-%d","quantity":1}`, sku, tc.strategy, i)
				if code, body := shoptest.Send(t, "POST", base+"/api/v1/orders", body, "Idempotency-Key", fmt.Sprint("k", i)); code != http.StatusCreated {
					t.Fatalf("order %d: %d %s", i, code, body)
				}
			}
			// A second click of the last buyer: replayed, and no new lock or batch.
			body := fmt.Sprintf(`{"sku":%q,"user_id":"%s-%d","quantity":1}`, sku, tc.strategy, orders-1)
			if code, body := shoptest.Send(t, "POST", base+"/api/v1/orders", body, "Idempotency-Key", fmt.Sprint("k", orders-1)); code != http.StatusCreated {
				t.Fatalf("second click: %d %s", code, body)
			}
			got := shoptest.Scrape(t, debug)
			for series, want := range tc.want {
				if v, ok := got[series]; !ok || v != want {
					t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
				}
			}
			if _, ok := got[`go_sql_open_connections{db_name="shop"}`]; !ok {
				t.Error("no database pool statistics")
			}
		})
	}
}

// orders is how many orders TestMetrics places with each strategy.
const orders = 3
