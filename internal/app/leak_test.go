package app_test

import (
	"log/slog"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
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
