package app_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestUnitBackDuringSoldOut: two shops on one database sell a SKU out, and
// each then answers its buyers sold out from a lease, without asking the
// strategy. A unit that comes back meanwhile, by a refund and then by a
// restock, sells to the next buyer, at the shop that held a lease: the
// give-back waited for the leases to end, so no buyer who came after it
// is told sold out while its unit is unsold. Without that wait, the
// second shop would still answer from its lease.
func TestUnitBackDuringSoldOut(t *testing.T) {
	testinfra.NeedsRealServers(t, "sold-out leases are taken on MySQL")
	eachLeasing(t, func(t *testing.T, env map[string]string) {
		a, b := leaseShop(t, env), leaseShop(t, env)
		const sku = "lease"
		mustCall(t, a, http.StatusOK, "PUT", "/api/v1/stock/"+sku, `{"quantity":2}`, "Authorization", "Bearer lease")
		ann := orderID(t, mustCall(t, a, http.StatusCreated, "POST", "/api/v1/orders", one(sku)("ann"), "Idempotency-Key", "ann"))
		mustCall(t, b, http.StatusCreated, "POST", "/api/v1/orders", one(sku)("bob"), "Idempotency-Key", "bob")

		leased(t, sku, a, b)
		// ann's retry is still her order, under a lease too.
		if code, body := call(t, b, "POST", "/api/v1/orders", one(sku)("ann"), "Idempotency-Key", "ann"); code != http.StatusCreated {
			t.Fatalf("ann's retry under a lease: %d %s; want her order replayed", code, body)
		}
		mustCall(t, a, http.StatusOK, "POST", fmt.Sprintf("/api/v1/orders/%d/refund", ann), `{"user_id":"ann"}`, "Idempotency-Key", "refund-ann")
		mustCall(t, b, http.StatusCreated, "POST", "/api/v1/orders", one(sku)("carl"), "Idempotency-Key", "carl")

		leased(t, sku, a, b)
		mustCall(t, a, http.StatusCreated, "POST", "/api/v1/stock/"+sku+"/adjustments", `{"delta":1,"reason":"restock"}`,
			"Authorization", "Bearer lease", "Idempotency-Key", "restock-1")
		mustCall(t, b, http.StatusCreated, "POST", "/api/v1/orders", one(sku)("dora"), "Idempotency-Key", "dora")
	})
}

// leased sends refused buyers to each shop until both answer sold out
// from a lease of their own.
func leased(t *testing.T, sku string, shops ...http.Handler) {
	t.Helper()
	for i, h := range shops {
		for n := 0; ; n++ {
			user := fmt.Sprintf("late-%d-%d-%d", time.Now().UnixNano(), i, n)
			before := testutil.ToFloat64(metrics.SoldOutLeaseAnswers)
			mustCall(t, h, http.StatusConflict, "POST", "/api/v1/orders", one(sku)(user), "Idempotency-Key", user)
			if testutil.ToFloat64(metrics.SoldOutLeaseAnswers) > before {
				break // this one was answered from the shop's lease
			}
			if n > 500 {
				t.Fatalf("shop %d took no sold-out lease after %d refusals", i, n)
			}
			time.Sleep(10 * time.Millisecond) // the lease is taken in the background
		}
	}
}

// eachLeasing runs test under atomic, batched and lua, each with the
// environment of shops on one database that take leases.
func eachLeasing(t *testing.T, test func(t *testing.T, env map[string]string)) {
	for _, name := range []string{"atomic", "batched", "lua"} {
		t.Run(name, func(t *testing.T) {
			s, err := strategy.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			env := strategytest.Env(t, s)
			env["SHOP_ADMIN_TOKEN"] = "lease"
			env["SHOP_SOLD_OUT_LEASE"] = "2s" // ample on a busy machine
			test(t, env)
		})
	}
}

func leaseShop(t *testing.T, env map[string]string) http.Handler {
	t.Helper()
	shop, err := app.New(t.Context(), strategytest.Load(t, env), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shop.Close() })
	return shop.Handler
}

func call(t *testing.T, h http.Handler, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func mustCall(t *testing.T, h http.Handler, want int, method, path, body string, header ...string) string {
	t.Helper()
	code, got := call(t, h, method, path, body, header...)
	if code != want {
		t.Fatalf("%s %s: %d %s; want %d", method, path, code, got, want)
	}
	return got
}

func orderID(t *testing.T, body string) int64 {
	t.Helper()
	var o struct{ ID int64 }
	if err := json.Unmarshal([]byte(body), &o); err != nil || o.ID == 0 {
		t.Fatalf("no order id in %s: %v", body, err)
	}
	return o.ID
}
