package httpapi_test

import (
	"encoding/json"
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
		{"/api/v1/stock/sku-1", `{"quantity":5}`, order.Stock{SKU: "sku-1", Initial: 8, Available: 5, Sold: 3}},
		{"/api/v1/stock/sku-1", `{"quantity":0}`, order.Stock{SKU: "sku-1", Initial: 3, Available: 0, Sold: 3}},
		{"/api/v1/stock/sku-2", `{"quantity":4}`, order.Stock{SKU: "sku-2", Initial: 4, Available: 4}},
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
	if s := stockOf(t, refusing); s != (order.Stock{SKU: "sku-1", Initial: 10, Available: 7, Sold: 3}) {
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
		string(body) != `{"sku":"sku-1","initial":4,"available":4,"sold":0}` {
		t.Errorf("set up again: %d %s", resp.StatusCode, body)
	}
}
