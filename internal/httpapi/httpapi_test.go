package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

const token = "test-admin-token"

// newServer serves the API on a fresh database and Redis prefix, guarded by
// the atomic strategy, with a stock of 10 under "sku-1".
func newServer(t testing.TB, adminToken string) *httptest.Server {
	t.Helper()
	srv, _ := newGuarded(t, adminToken, "atomic")
	return srv
}

// newGuarded is newServer with the named strategy; it returns the database
// too.
func newGuarded(t testing.TB, adminToken, strategy string) (*httptest.Server, *gorm.DB) {
	t.Helper()
	w := newWorld(t, strategy)
	return w.serve(t, httpapi.Config{AdminToken: adminToken}), w.db
}

// world is what the instances of one shop share: a fresh database with a
// stock of 10 under "sku-1", a Redis prefix, and the strategy, which
// needs no server beyond the database.
type world struct {
	dsn      string
	db       *gorm.DB
	redis    testinfra.RedisNamespace
	strategy string
}

func newWorld(t testing.TB, strategy string) *world {
	t.Helper()
	dsn := testinfra.MySQL(t)
	return newWorldOn(t, dsn, testinfra.ShopDB(t, dsn), strategy)
}

// newWorldOn is newWorld on the database at dsn, opened as gdb.
func newWorldOn(t testing.TB, dsn string, gdb *gorm.DB, strategy string) *world {
	t.Helper()
	w := &world{dsn: dsn, db: gdb, redis: testinfra.Redis(t), strategy: strategy}
	w.reset(t, 10)
	return w
}

// placement builds what an instance's orders are placed through, by the
// registry, as serve does.
func (w *world) placement(t testing.TB) order.Placement {
	t.Helper()
	return strategytest.Placement(t, w.strategy, &backend.Backends{DB: w.db}, map[string]string{"SHOP_MYSQL_DSN": w.dsn})
}

// reset puts quantity units of "sku-1" on sale.
func (w *world) reset(t testing.TB, quantity int) {
	t.Helper()
	if _, err := order.NewService(w.db, w.placement(t), nil).SetStock(t.Context(), "sku-1", quantity); err != nil {
		t.Fatal(err)
	}
}

// client returns a client of the world's Redis, closed at cleanup.
func (w *world) client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: w.redis.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// serve starts one instance of the shop, with its own guard and Redis
// client, as cfg says; serve fills in the rest.
func (w *world) serve(t testing.TB, cfg httpapi.Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(w.handler(t, cfg))
	t.Cleanup(srv.Close)
	return srv
}

// handler is the router of the instance that serve starts.
func (w *world) handler(t testing.TB, cfg httpapi.Config) http.Handler {
	t.Helper()
	rdb := w.client(t)
	cfg.Orders = order.NewService(w.db, w.placement(t), &order.Options{Keys: &order.KeyOptions{Redis: rdb, Prefix: w.redis.Prefix}})
	cfg.Idempotency = idempotency.NewStore(rdb, &idempotency.Options{Prefix: w.redis.Prefix})
	// Generous: a test that runs beside the whole suite on 2 cores must not
	// see its requests end busy for want of time.
	cfg.RequestTimeout = 30 * time.Second
	cfg.Ready = func(ctx context.Context) error {
		sqlDB, err := w.db.DB()
		if err != nil {
			return err
		}
		return sqlDB.PingContext(ctx)
	}
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return httpapi.New(cfg)
}

type call struct {
	method, path, body string
	header             map[string]string
}

func do(t testing.TB, srv *httptest.Server, c call) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), c.method, srv.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.method == "POST" {
		req.Header.Set("Idempotency-Key", rand.Text()) // a new request unless the call says otherwise
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func stockOf(t testing.TB, srv *httptest.Server) order.Stock {
	t.Helper()
	return stockNamed(t, srv, "sku-1")
}

func stockNamed(t testing.TB, srv *httptest.Server, sku string) order.Stock {
	t.Helper()
	resp, body := do(t, srv, call{method: "GET", path: "/api/v1/stock/" + sku})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stock: %d %s", resp.StatusCode, body)
	}
	var s order.Stock
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBadInput sends malformed requests: each gets a 4xx problem+json of the
// right type and leaves the stock and the orders as they were.
func TestBadInput(t *testing.T) {
	t.Parallel()
	srv := newServer(t, token)
	admin := map[string]string{"Authorization": "Bearer " + token}
	long := strings.Repeat("x", httpapi.MaxIDLength+1)
	tests := []struct {
		name   string
		call   call
		status int
		slug   string
	}{
		{"empty body", call{method: "POST", path: "/api/v1/orders"}, 400, "invalid-request"},
		{"malformed JSON", call{method: "POST", path: "/api/v1/orders", body: `{"sku":`}, 400, "invalid-request"},
		{"not an object", call{method: "POST", path: "/api/v1/orders", body: `[1]`}, 400, "invalid-request"},
		{"unknown field", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1,"price":0}`}, 400, "invalid-request"},
		{"trailing data", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1}{}`}, 400, "invalid-request"},
		{"quantity 0", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":0}`}, 400, "invalid-request"},
		{"quantity missing", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u"}`}, 400, "invalid-request"},
		{"quantity negative", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":-1}`}, 400, "invalid-request"},
		{"quantity 101", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":101}`}, 400, "invalid-request"},
		{"quantity fraction", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1.5}`}, 400, "invalid-request"},
		{"quantity string", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":"1"}`}, 400, "invalid-request"},
		{"quantity overflow", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1e30}`}, 400, "invalid-request"},
		{"empty sku", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"","user_id":"u","quantity":1}`}, 400, "invalid-request"},
		{"long sku", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"` + long + `","user_id":"u","quantity":1}`}, 400, "invalid-request"},
		{"empty user", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"","quantity":1}`}, 400, "invalid-request"},
		{"long user", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"` + long + `","quantity":1}`}, 400, "invalid-request"},
		{"user with space", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"a b","quantity":1}`}, 400, "invalid-request"},
		{"user with control", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"a\u0000","quantity":1}`}, 400, "invalid-request"},
		{"body over 8 KiB", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1}` + strings.Repeat(" ", httpapi.MaxBodyBytes)}, 400, "invalid-request"},
		{"unknown sku", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-2","user_id":"u","quantity":1}`}, 404, "not-found"},
		{"more than the stock", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":11}`}, 409, "sold-out"},
		{"cart empty", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":[]}`}, 400, "invalid-request"},
		{"cart and sku", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","quantity":1,"user_id":"u","items":[{"sku":"sku-1","quantity":1}]}`}, 400, "invalid-request"},
		{"cart of 21 lines", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":[` + strings.Repeat(`{"sku":"x","quantity":1},`, 20) + `{"sku":"sku-1","quantity":1}]}`}, 400, "invalid-request"},
		{"cart sku twice", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":[{"sku":"sku-1","quantity":1},{"sku":"sku-1","quantity":2}]}`}, 400, "invalid-request"},
		{"cart quantity 0", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":[{"sku":"sku-1","quantity":1},{"sku":"sku-9","quantity":0}]}`}, 400, "invalid-request"},
		{"cart quantity 101", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":[{"sku":"sku-1","quantity":101}]}`}, 400, "invalid-request"},
		{"cart empty sku", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":[{"sku":"","quantity":1}]}`}, 400, "invalid-request"},
		{"cart line unknown field", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":[{"sku":"sku-1","quantity":1,"price":3}]}`}, 400, "invalid-request"},
		{"cart not a list", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":{"sku":"sku-1","quantity":1}}`}, 400, "invalid-request"},
		{"cart with an unknown sku", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":[{"sku":"sku-1","quantity":1},{"sku":"sku-2","quantity":1}]}`}, 404, "not-found"},
		{"cart more than the stock", call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"u","items":[{"sku":"sku-1","quantity":11}]}`}, 409, "sold-out"},
		{"order id not a number", call{method: "GET", path: "/api/v1/orders/abc"}, 400, "invalid-request"},
		{"order id zero", call{method: "GET", path: "/api/v1/orders/0"}, 400, "invalid-request"},
		{"unknown order", call{method: "GET", path: "/api/v1/orders/999999"}, 404, "not-found"},
		{"unknown stock", call{method: "GET", path: "/api/v1/stock/sku-2"}, 404, "not-found"},
		{"put stock without token", call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{"quantity":0}`}, 401, "unauthorized"},
		{"put stock with wrong token", call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{"quantity":0}`, header: map[string]string{"Authorization": "Bearer nope"}}, 401, "unauthorized"},
		{"put stock negative", call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{"quantity":-1}`, header: admin}, 400, "invalid-request"},
		{"put stock missing quantity", call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{}`, header: admin}, 400, "invalid-request"},
		{"put stock unknown field", call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{"quantity":1,"initial":1}`, header: admin}, 400, "invalid-request"},
		{"put stock long sku", call{method: "PUT", path: "/api/v1/stock/" + long, body: `{"quantity":1}`, header: admin}, 400, "invalid-request"},
		{"no idempotency key", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1}`, header: map[string]string{"Idempotency-Key": ""}}, 400, "idempotency-key-missing"},
		{"idempotency key too long", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1}`, header: map[string]string{"Idempotency-Key": long + long + long + long + long}}, 400, "invalid-request"},
		{"idempotency key unterminated", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1}`, header: map[string]string{"Idempotency-Key": `"abc`}}, 400, "invalid-request"},
		{"refund without key", call{method: "POST", path: "/api/v1/orders/1/refund", body: `{"user_id":"u"}`, header: map[string]string{"Idempotency-Key": ""}}, 400, "idempotency-key-missing"},
		{"refund bad id", call{method: "POST", path: "/api/v1/orders/x/refund", body: `{"user_id":"u"}`}, 400, "invalid-request"},
		{"refund without user", call{method: "POST", path: "/api/v1/orders/1/refund", body: `{}`}, 400, "invalid-request"},
		{"refund unknown field", call{method: "POST", path: "/api/v1/orders/1/refund", body: `{"user_id":"u","quantity":1}`}, 400, "invalid-request"},
		{"refund unknown order", call{method: "POST", path: "/api/v1/orders/999999/refund", body: `{"user_id":"u"}`}, 404, "not-found"},
		{"list without user", call{method: "GET", path: "/api/v1/orders"}, 400, "invalid-request"},
		{"list limit 0", call{method: "GET", path: "/api/v1/orders?user_id=u&limit=0"}, 400, "invalid-request"},
		{"list limit 101", call{method: "GET", path: "/api/v1/orders?user_id=u&limit=101"}, 400, "invalid-request"},
		{"list bad after", call{method: "GET", path: "/api/v1/orders?user_id=u&after=-1"}, 400, "invalid-request"},
		{"list unknown parameter", call{method: "GET", path: "/api/v1/orders?user_id=u&page=2"}, 400, "invalid-request"},
		{"unknown route", call{method: "GET", path: "/api/v1/nope"}, 404, "not-found"},
		{"wrong method", call{method: "DELETE", path: "/api/v1/orders"}, 405, "method-not-allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := stockOf(t, srv)
			resp, body := do(t, srv, tt.call)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Errorf("Content-Type %q, want application/problem+json", ct)
			}
			var p httpapi.Problem
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("body is not a problem: %v: %s", err, body)
			}
			if p.Type != tt.slug || p.Status != tt.status || p.Title == "" {
				t.Errorf("problem %+v, want type %q status %d", p, tt.slug, tt.status)
			}
			if after := stockOf(t, srv); after != before {
				t.Errorf("stock changed from %+v to %+v", before, after)
			}
		})
	}
}

// TestAdminDisabled: with no admin token configured, stock changes are refused
// whatever the request carries.
func TestAdminDisabled(t *testing.T) {
	t.Parallel()
	srv := newServer(t, "")
	for _, auth := range []string{"", "Bearer ", "Bearer x"} {
		resp, body := do(t, srv, call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{"quantity":5}`, header: map[string]string{"Authorization": auth}})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401: %s", auth, resp.StatusCode, body)
		}
	}
	if s := stockOf(t, srv); s.Initial != 10 || s.Available != 10 {
		t.Errorf("stock changed: %+v", s)
	}
}

// TestOrderFlow places orders until the stock runs out, over HTTP.
func TestOrderFlow(t *testing.T) {
	t.Parallel()
	srv := newServer(t, token)
	admin := map[string]string{"Authorization": "Bearer " + token}
	resp, body := do(t, srv, call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{"quantity":2}`, header: admin})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("put stock: %d %s", resp.StatusCode, body)
	}
	var first struct {
		ID       int64  `json:"id"`
		Status   string `json:"status"`
		Quantity int    `json:"quantity"`
	}
	resp, body = do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"alice","quantity":2}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("order: %d %s", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &first); err != nil || first.ID == 0 || first.Status != "created" || first.Quantity != 2 {
		t.Fatalf("order body %s (%v)", body, err)
	}
	resp, body = do(t, srv, call{method: "GET", path: resp.Header.Get("Location")})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"user_id":"alice"`) {
		t.Errorf("GET Location: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"bob","quantity":1}`})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), `"sold-out"`) {
		t.Errorf("order past the stock: %d %s", resp.StatusCode, body)
	}
	if s := stockOf(t, srv); s != (order.Stock{SKU: "sku-1", Initial: 2, Available: 0, Sold: 2, Received: 2}) {
		t.Errorf("stock %+v", s)
	}
	resp, body = do(t, srv, call{method: "GET", path: "/readyz"})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("readyz: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, srv, call{method: "GET", path: "/api/openapi.yaml"})
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "openapi: 3.1") {
		t.Errorf("openapi.yaml: %d %.40s", resp.StatusCode, body)
	}
}

// TestFencedIsBusy: an order whose lock turns out stale (a holder with a
// newer fencing token has claimed the SKU) is refused with 503 busy, and
// neither takes stock nor creates an order.
func TestFencedIsBusy(t *testing.T) {
	t.Parallel()
	srv, gdb := newGuarded(t, token, "local")
	// The newer holder, in another instance, claimed the SKU with token 1000;
	// this instance's local lock hands out token 1.
	if err := gdb.Exec(`UPDATE stock_items SET fence = 1000 WHERE sku = 'sku-1'`).Error; err != nil {
		t.Fatal(err)
	}
	resp, body := do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"alice","quantity":1}`})
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"type":"busy"`) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("fenced order: %d %s, want 503 busy with Retry-After", resp.StatusCode, body)
	}
	if s := stockOf(t, srv); s.Available != 10 || s.Sold != 0 {
		t.Errorf("stock changed: %+v", s)
	}
}

// TestListOrders pages through a user's orders, oldest first.
func TestListOrders(t *testing.T) {
	t.Parallel()
	srv := newServer(t, token)
	for _, user := range []string{"ann", "ann", "bo", "ann"} {
		if resp, body := do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"` + user + `","quantity":1}`}); resp.StatusCode != http.StatusCreated {
			t.Fatalf("order: %d %s", resp.StatusCode, body)
		}
	}
	type page struct {
		Orders []struct {
			ID     int64  `json:"id"`
			UserID string `json:"user_id"`
		} `json:"orders"`
		Next *int64 `json:"next_after"`
	}
	get := func(query string) page {
		t.Helper()
		resp, body := do(t, srv, call{method: "GET", path: "/api/v1/orders?" + query})
		var p page
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &p) != nil {
			t.Fatalf("list %s: %d %s", query, resp.StatusCode, body)
		}
		return p
	}
	first := get("user_id=ann&sku=sku-1&limit=2")
	if len(first.Orders) != 2 || first.Next == nil || first.Orders[0].ID >= first.Orders[1].ID {
		t.Fatalf("first page %+v", first)
	}
	second := get("user_id=ann&limit=2&after=" + strconv.FormatInt(*first.Next, 10))
	if len(second.Orders) != 1 || second.Next != nil || second.Orders[0].ID <= first.Orders[1].ID || second.Orders[0].UserID != "ann" {
		t.Fatalf("second page %+v", second)
	}
	if other := get("user_id=ann&sku=sku-2"); len(other.Orders) != 0 {
		t.Errorf("orders of another sku: %+v", other)
	}
}

// TestDatabaseDownIsBusy: while the database server is down (killed),
// every endpoint that needs it answers 503 busy with Retry-After, never
// 500, and /readyz says so. Once it is back, the same server sells again:
// its pool drops the dead connections.
func TestDatabaseDownIsBusy(t *testing.T) {
	t.Parallel()
	m := testinfra.StartMariaDB(t)
	dsn := m.DSN(t)
	w := newWorldOn(t, dsn, testinfra.ShopDB(t, dsn), "atomic")
	srv := w.serve(t, httpapi.Config{AdminToken: token})
	buy := call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"alice","quantity":1}`}
	if resp, body := do(t, srv, buy); resp.StatusCode != http.StatusCreated {
		t.Fatalf("order: %d %s", resp.StatusCode, body)
	}

	m.Kill()
	for _, c := range []call{
		buy,
		{method: "POST", path: "/api/v1/orders/1/refund", body: `{"user_id":"alice"}`},
		{method: "GET", path: "/api/v1/orders/1"},
		{method: "GET", path: "/api/v1/orders?user_id=alice"},
		{method: "GET", path: "/api/v1/stock/sku-1"},
		{method: "PUT", path: "/api/v1/stock/sku-2", body: `{"quantity":5}`, header: map[string]string{"Authorization": "Bearer " + token}},
	} {
		resp, body := do(t, srv, c)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"type":"busy"`) || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the database down: %d %s, want 503 busy with Retry-After", c.method, c.path, resp.StatusCode, body)
		}
	}
	if resp, body := do(t, srv, call{method: "GET", path: "/readyz"}); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the database down: %d %s", resp.StatusCode, body)
	}

	m.Start()
	if resp, body := do(t, srv, buy); resp.StatusCode != http.StatusCreated {
		t.Errorf("order once the database is back: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, srv, call{method: "GET", path: "/readyz"}); resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz once the database is back: %d %s", resp.StatusCode, body)
	}
}
