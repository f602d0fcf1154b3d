package app_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/payment"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

const roSecret = "the payment secret of the read-only test, 32+ bytes"

// TestReadOnlyDatabaseIsBusy: while the shop's MySQL server is read-only,
// as an old primary is during a switchover, every request that writes
// answers 503 busy with Retry-After under every strategy that writes to
// MySQL: never 500, and never a business answer. An acknowledged order
// replays, and /readyz says why the shop is not ready. Once the server
// takes writes again, the same shops sell. The shops log in as a user
// that read_only binds, as in production.
func TestReadOnlyDatabaseIsBusy(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it makes a MariaDB server of its own read-only")
	m := testinfra.StartMariaDB(t)
	admin, err := sql.Open("mysql", m.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	names := []string{"atomic", "batched", "lua", "redis", "pessimistic", "optimistic", "dbtable", "local"}
	shops := map[string]*roShop{}
	for _, name := range names {
		shops[name] = startROShop(t, name, m.ShopDSN(t))
	}

	setReadOnly(t, admin, "ON")
	t.Run("read-only", func(t *testing.T) {
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				shops[name].readOnly(t)
			})
		}
	})
	setReadOnly(t, admin, "OFF")
	t.Run("writable", func(t *testing.T) {
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				s := shops[name]
				s.want(t, http.StatusCreated, "POST", "/api/v1/orders", `{"sku":"ro","user_id":"dan","quantity":1}`)
				s.want(t, http.StatusOK, "GET", "/readyz", "")
			})
		}
	})
}

func setReadOnly(t *testing.T, admin *sql.DB, v string) {
	t.Helper()
	if _, err := admin.ExecContext(t.Context(), "SET GLOBAL read_only = "+v); err != nil {
		t.Fatal(err)
	}
}

// roShop is a shop with 10 units of "ro", a paid order of ann's, whose
// body and key are kept, and a pending one of bob's.
type roShop struct {
	h         http.Handler
	ann       string // the body of ann's order's answer
	annID     int64
	bobID     int64
	annsOrder string
}

func startROShop(t *testing.T, name, dsn string) *roShop {
	t.Helper()
	s, err := strategy.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	env := strategytest.Env(t, s)
	env["SHOP_MYSQL_DSN"] = dsn
	env["SHOP_ADMIN_TOKEN"] = "ro"
	env["SHOP_PAYMENT_WINDOW"] = "10m"
	env["SHOP_PAYMENT_SECRET"] = roSecret
	// batched and lua's writers try a batch again while its buyers wait:
	// the endpoint may reach a writable primary meanwhile.
	env["SHOP_REQUEST_TIMEOUT"] = "5s"
	shop, err := app.New(t.Context(), strategytest.Load(t, env), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shop.Close() })
	r := &roShop{h: shop.Handler, annsOrder: `{"sku":"ro","user_id":"ann","quantity":1}`}
	r.want(t, http.StatusOK, "PUT", "/api/v1/stock/ro", `{"quantity":10}`)
	r.ann = r.want(t, http.StatusCreated, "POST", "/api/v1/orders", r.annsOrder, "Idempotency-Key", "ann")
	r.annID = idOf(t, r.ann)
	r.want(t, http.StatusOK, "POST", fmt.Sprintf("/api/v1/orders/%d/pay", r.annID), `{"payment_id":"pay-ann"}`)
	r.bobID = idOf(t, r.want(t, http.StatusCreated, "POST", "/api/v1/orders", `{"sku":"ro","user_id":"bob","quantity":1}`))
	return r
}

// readOnly checks the answers of a shop whose server is read-only.
func (r *roShop) readOnly(t *testing.T) {
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/orders", `{"sku":"ro","user_id":"carl","quantity":1}`},
		{"POST", "/api/v1/orders", `{"user_id":"carl","items":[{"sku":"ro","quantity":1}]}`},
		{"POST", fmt.Sprintf("/api/v1/orders/%d/refund", r.annID), `{"user_id":"ann"}`},
		{"POST", fmt.Sprintf("/api/v1/orders/%d/pay", r.bobID), `{"payment_id":"pay-bob"}`},
		{"POST", fmt.Sprintf("/api/v1/orders/%d/cancel", r.bobID), `{"user_id":"bob"}`},
		{"PUT", "/api/v1/stock/ro", `{"quantity":20}`},
		{"POST", "/api/v1/stock/ro/adjustments", `{"delta":5,"reason":"restock"}`},
		{"PUT", "/api/v1/stock/ro-new", `{"quantity":20}`},
	} {
		rec := r.do(t, c.method, c.path, c.body)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"type":"busy"`) || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s %s %s on a read-only server: %d %s, want 503 busy with Retry-After", c.method, c.path, c.body, rec.Code, rec.Body)
		}
	}
	if got := r.want(t, http.StatusCreated, "POST", "/api/v1/orders", r.annsOrder, "Idempotency-Key", "ann"); got != r.ann {
		t.Errorf("ann's order replayed as %s, want %s", got, r.ann)
	}
	if body := r.want(t, http.StatusServiceUnavailable, "GET", "/readyz", ""); !strings.Contains(body, "read-only") {
		t.Errorf("/readyz on a read-only server: %s, want it to say so", body)
	}
}

// want sends a request, with a new Idempotency-Key unless header gives
// one, and checks its status; it returns the body.
func (r *roShop) want(t *testing.T, status int, method, path, body string, header ...string) string {
	t.Helper()
	rec := r.do(t, method, path, body, header...)
	if rec.Code != status {
		t.Errorf("%s %s %s: %d %s, want %d", method, path, body, rec.Code, rec.Body, status)
	}
	return rec.Body.String()
}

func (r *roShop) do(t *testing.T, method, path, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer ro")
	req.Header.Set("Idempotency-Key", fmt.Sprint(time.Now().UnixNano()))
	if strings.HasSuffix(path, "/pay") {
		req.Header.Set(payment.Header, payment.Sign([]byte(roSecret), time.Now(), []byte(body)))
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	return rec
}

func idOf(t *testing.T, body string) int64 {
	t.Helper()
	var o struct{ ID int64 }
	if err := json.Unmarshal([]byte(body), &o); err != nil || o.ID == 0 {
		t.Fatalf("no order id in %s: %v", body, err)
	}
	return o.ID
}
