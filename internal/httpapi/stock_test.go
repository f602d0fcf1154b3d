package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/order"
)

// TestPutStockKeepsOrders: PUT on a SKU with orders sets what is for sale
// now and keeps the orders, with initial moved by as much; on a new SKU it
// sets one up.
func TestPutStockKeepsOrders(t *testing.T) {
	t.Parallel()
	srv := newServer(t, token)
	admin := map[string]string{"Authorization": "Bearer " + token}
	resp, body := do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"ann","quantity":3}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("order: %d %s", resp.StatusCode, body)
	}
	location := resp.Header.Get("Location")
	for _, tt := range []struct {
		path, body string
		want       order.Stock
	}{
		{"/api/v1/stock/sku-1", `{"quantity":5}`, order.Stock{SKU: "sku-1", Initial: 8, Available: 5, Sold: 3, Received: 8}},
		{"/api/v1/stock/sku-1", `{"quantity":0}`, order.Stock{SKU: "sku-1", Initial: 3, Available: 0, Sold: 3, Received: 3}},
		{"/api/v1/stock/sku-2", `{"quantity":4}`, order.Stock{SKU: "sku-2", Initial: 4, Available: 4, Received: 4}},
	} {
		resp, body := do(t, srv, call{method: "PUT", path: tt.path, body: tt.body, header: admin})
		var got order.Stock
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil || got != tt.want {
			t.Errorf("PUT %s %s: %d %s, want %+v", tt.path, tt.body, resp.StatusCode, body, tt.want)
		}
	}
	if resp, body := do(t, srv, call{method: "GET", path: location}); resp.StatusCode != http.StatusOK {
		t.Errorf("the order after the changes: %d %s", resp.StatusCode, body)
	}
}

// TestDeleteStock: DELETE is forbidden, and deletes nothing, unless the
// shop allows it; then the SKU and its orders are gone, and a PUT sets the
// SKU up again from nothing.
func TestDeleteStock(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "atomic")
	refusing, allowing := w.serve(t, httpapi.Config{AdminToken: token}), w.serve(t, httpapi.Config{AdminToken: token, AllowReset: true})
	admin := map[string]string{"Authorization": "Bearer " + token}
	resp, body := do(t, refusing, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"ann","quantity":3}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("order: %d %s", resp.StatusCode, body)
	}
	location := resp.Header.Get("Location")

	for _, tt := range []struct {
		name   string
		srv    *httptest.Server
		header map[string]string
		status int
		slug   string
	}{
		{"without a token", allowing, nil, http.StatusUnauthorized, "unauthorized"},
		{"not allowed", refusing, admin, http.StatusForbidden, "forbidden"},
	} {
		resp, body := do(t, tt.srv, call{method: "DELETE", path: "/api/v1/stock/sku-1", header: tt.header})
		if resp.StatusCode != tt.status || !strings.Contains(string(body), `"type":"`+tt.slug+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tt.name, resp.StatusCode, body, tt.status, tt.slug)
		}
	}
	if s := stockOf(t, refusing); s != (order.Stock{SKU: "sku-1", Initial: 10, Available: 7, Sold: 3, Received: 10}) {
		t.Errorf("stock after the refused deletes: %+v", s)
	}

	if resp, body := do(t, allowing, call{method: "DELETE", path: "/api/v1/stock/sku-1", header: admin}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("allowed delete: %d %s", resp.StatusCode, body)
	}
	for _, c := range []call{
		{method: "GET", path: "/api/v1/stock/sku-1"},
		{method: "GET", path: location},
		{method: "DELETE", path: "/api/v1/stock/sku-1", header: admin},
	} {
		if resp, body := do(t, allowing, c); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s after the delete: %d %s, want 404", c.method, c.path, resp.StatusCode, body)
		}
	}
	if resp, body := do(t, allowing, call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{"quantity":4}`, header: admin}); resp.StatusCode != http.StatusOK ||
		string(body) != `{"sku":"sku-1","initial":4,"available":4,"sold":0,"pending":0,"received":4}` {
		t.Errorf("set up again: %d %s", resp.StatusCode, body)
	}
}

// TestAdjustments: an adjustment needs the admin token and an
// Idempotency-Key; a repeat gets its first answer, from the key store or,
// once the store has forgotten it, from the database; a key reused for
// another adjustment is refused; one below 0, a stale compare-and-set and
// bad input change nothing. The movements page oldest first.
func TestAdjustments(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "atomic")
	srv := w.serve(t, httpapi.Config{AdminToken: token})
	forgot := *w // a key store that has forgotten every key
	forgot.redis.Prefix += "forgot:"
	forgetful := forgot.serve(t, httpapi.Config{AdminToken: token})
	const path = "/api/v1/stock/sku-1/adjustments"
	admin := func(key string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + token, "Idempotency-Key": key}
	}
	restock := `{"delta":5,"reason":"restock","reference":"PO-1"}`

	resp, first := do(t, srv, call{method: "POST", path: path, body: restock, header: admin("k1")})
	var m struct {
		ID     int64  `json:"id"`
		Delta  int    `json:"delta"`
		Reason string `json:"reason"`
		Actor  string `json:"actor"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(first, &m) != nil || m.Delta != 5 || m.Reason != "restock" || m.Actor != "admin" {
		t.Fatalf("adjustment: %d %s", resp.StatusCode, first)
	}
	for name, s := range map[string]*httptest.Server{"key store": srv, "database": forgetful} {
		resp, body := do(t, s, call{method: "POST", path: path, body: restock, header: admin("k1")})
		if resp.StatusCode != http.StatusCreated || string(body) != string(first) || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("repeat, answered by the %s: %d %s, want the first answer replayed: %s", name, resp.StatusCode, body, first)
		}
		resp, body = do(t, s, call{method: "POST", path: path, body: `{"delta":6,"reason":"restock","reference":"PO-1"}`, header: admin("k1")})
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"idempotency-key-reused"`) {
			t.Errorf("key reused, answered by the %s: %d %s", name, resp.StatusCode, body)
		}
	}
	want := order.Stock{SKU: "sku-1", Initial: 15, Available: 15, Received: 15}
	if s := stockOf(t, srv); s != want {
		t.Fatalf("stock %+v, want %+v", s, want)
	}

	long := strings.Repeat("x", 129)
	for _, tt := range []struct {
		name, method, body, key string
		status                  int
		slug                    string
	}{
		{"below 0", "POST", `{"delta":-16,"reason":"damaged"}`, "k2", http.StatusConflict, "insufficient-stock"},
		{"delta 0", "POST", `{"delta":0,"reason":"restock"}`, "k3", http.StatusBadRequest, "invalid-request"},
		{"unknown reason", "POST", `{"delta":1,"reason":"gift"}`, "k4", http.StatusBadRequest, "invalid-request"},
		{"the shop's own reason", "POST", `{"delta":1,"reason":"initial"}`, "k5", http.StatusBadRequest, "invalid-request"},
		{"reference too long", "POST", `{"delta":1,"reason":"restock","reference":"` + long + `"}`, "k6", http.StatusBadRequest, "invalid-request"},
		{"no key", "POST", `{"delta":1,"reason":"restock"}`, "", http.StatusBadRequest, "idempotency-key-missing"},
		{"stale", "PUT", `{"quantity":20,"expected_available":14}`, "", http.StatusConflict, "stale"},
	} {
		p := path
		if tt.method == "PUT" {
			p = "/api/v1/stock/sku-1"
		}
		resp, body := do(t, srv, call{method: tt.method, path: p, body: tt.body, header: admin(tt.key)})
		if resp.StatusCode != tt.status || !strings.Contains(string(body), `"type":"`+tt.slug+`"`) || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want %d %s", tt.name, resp.StatusCode, body, tt.status, tt.slug)
		}
		if tt.slug == "stale" && !strings.Contains(string(body), `"available":15`) {
			t.Errorf("stale: %s, want the current available, 15", body)
		}
		if s := stockOf(t, srv); s != want {
			t.Errorf("%s changed the stock: %+v, want %+v", tt.name, s, want)
		}
	}

	resp, body := do(t, srv, call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{"quantity":20,"expected_available":15}`, header: admin("")})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"available":20,`) {
		t.Errorf("compare-and-set of the current value: %d %s", resp.StatusCode, body)
	}
	var reasons []string
	for after := ""; ; {
		resp, body := do(t, srv, call{method: "GET", path: "/api/v1/stock/sku-1/movements?limit=2" + after, header: admin("")})
		var page struct {
			Movements []struct {
				Reason string `json:"reason"`
				Delta  int    `json:"delta"`
			} `json:"movements"`
			Next *int64 `json:"next_after"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil {
			t.Fatalf("movements: %d %s", resp.StatusCode, body)
		}
		for _, m := range page.Movements {
			reasons = append(reasons, fmt.Sprintf("%s%+d", m.Reason, m.Delta))
		}
		if page.Next == nil {
			break
		}
		after = fmt.Sprintf("&after=%d", *page.Next)
	}
	if got := strings.Join(reasons, " "); got != "initial+10 restock+5 set+5" {
		t.Errorf("movements %q, want initial+10 restock+5 set+5", got)
	}
	if resp, body := do(t, srv, call{method: "GET", path: "/api/v1/stock/sku-1/movements"}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("movements without the admin token: %d %s", resp.StatusCode, body)
	}
}
