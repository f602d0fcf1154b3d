package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

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
