package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestUnitBackUnderLimit: two shops on one database, a per-user limit of
// 1. A buyer buys a unit, and then, asking again with new keys, is told
// limit-reached from a limit lease at each shop, without asking the
// strategy. The buyer's order is cancelled at one shop, and the buyer's
// next new key at the other is granted: the cancellation waited for the
// leases to end, so the buyer is never refused for the limit while under
// it. Without that wait, the other shop would still answer from its
// lease. The refused keys keep their answers: their retries, once the
// buyer is under the limit, are limit-reached again, replayed.
func TestUnitBackUnderLimit(t *testing.T) {
	testinfra.NeedsRealServers(t, "limit leases are taken on MySQL")
	eachLeasing(t, func(t *testing.T, env map[string]string) {
		env["SHOP_PER_USER_LIMIT"] = "1"
		env["SHOP_PAYMENT_WINDOW"] = "1h" // orders are pending: the buyer may cancel
		a, b := leaseShop(t, env), leaseShop(t, env)
		const sku = "limit"
		mustCall(t, a, http.StatusOK, "PUT", "/api/v1/stock/"+sku, `{"quantity":5}`, "Authorization", "Bearer lease")
		ann := orderID(t, mustCall(t, a, http.StatusCreated, "POST", "/api/v1/orders", one(sku)("ann"), "Idempotency-Key", "ann-1"))
		limitReached(t, b, sku, "ann", "ann-2") // by the strategy

		keys := limitLeased(t, sku, "ann", a, b)
		// ann's retry is still her order, under a lease too.
		if code, body := call(t, b, "POST", "/api/v1/orders", one(sku)("ann"), "Idempotency-Key", "ann-1"); code != http.StatusCreated {
			t.Fatalf("ann's retry under a lease: %d %s; want her order replayed", code, body)
		}
		mustCall(t, b, http.StatusOK, "POST", fmt.Sprintf("/api/v1/orders/%d/cancel", ann), `{"user_id":"ann"}`, "Idempotency-Key", "cancel-ann")

		// Under the limit now, ann's refused keys still replay their
		// answers, and her next new key buys, at the other shop.
		limitReached(t, a, sku, "ann", keys[0])
		limitReached(t, b, sku, "ann", keys[1])
		limitReached(t, a, sku, "ann", "ann-2")
		mustCall(t, a, http.StatusCreated, "POST", "/api/v1/orders", one(sku)("ann"), "Idempotency-Key", "ann-next")
	})
}

// limitLeased sends user's new keys to each shop until both answer
// limit-reached from a lease of their own, and returns, for each shop,
// the key it answered so.
func limitLeased(t *testing.T, sku, user string, shops ...http.Handler) (keys []string) {
	t.Helper()
	for i, h := range shops {
		for n := 0; ; n++ {
			key := fmt.Sprintf("more-%d-%d-%d", time.Now().UnixNano(), i, n)
			before := testutil.ToFloat64(metrics.LimitLeaseAnswers)
			limitReached(t, h, sku, user, key)
			if testutil.ToFloat64(metrics.LimitLeaseAnswers) > before {
				keys = append(keys, key) // answered from the shop's lease
				break
			}
			if n > 500 {
				t.Fatalf("shop %d took no limit lease after %d refusals", i, n)
			}
			time.Sleep(10 * time.Millisecond) // the lease is taken in the background
		}
	}
	return keys
}

// limitReached checks that h answers user's order of a unit of sku under
// key limit-reached.
func limitReached(t *testing.T, h http.Handler, sku, user, key string) {
	t.Helper()
	code, body := call(t, h, "POST", "/api/v1/orders", one(sku)(user), "Idempotency-Key", key)
	if code != http.StatusConflict || !strings.Contains(body, `"type":"limit-reached"`) {
		t.Fatalf("%s's order under key %s: %d %s; want 409 limit-reached", user, key, code, body)
	}
}
