package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/order"
)

// TestCartFlow places a cart over HTTP: its answer lists the lines, by
// SKU; a cart that one SKU cannot fill is refused whole, naming that SKU;
// and a refund gives every line back.
func TestCartFlow(t *testing.T) {
	t.Parallel()
	srv := newServer(t, token)
	admin := map[string]string{"Authorization": "Bearer " + token}
	for sku, n := range map[string]string{"sku-1": `{"quantity":2}`, "sku-2": `{"quantity":1}`, "sku-3": `{"quantity":5}`} {
		if resp, body := do(t, srv, call{method: "PUT", path: "/api/v1/stock/" + sku, body: n, header: admin}); resp.StatusCode != http.StatusOK {
			t.Fatalf("put stock %s: %d %s", sku, resp.StatusCode, body)
		}
	}
	type shown struct {
		ID       int64        `json:"id"`
		Status   string       `json:"status"`
		SKU      *string      `json:"sku"`
		Quantity *int         `json:"quantity"`
		Items    []order.Line `json:"items"`
	}
	resp, body := do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"ann","items":[{"sku":"sku-2","quantity":1},{"sku":"sku-1","quantity":1}]}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("cart: %d %s", resp.StatusCode, body)
	}
	var cart shown
	want := []order.Line{{SKU: "sku-1", Quantity: 1}, {SKU: "sku-2", Quantity: 1}}
	if err := json.Unmarshal(body, &cart); err != nil || cart.ID == 0 || !slices.Equal(cart.Items, want) || cart.SKU != nil || cart.Quantity != nil {
		t.Fatalf("cart answer %s (%v); want items %v and no sku or quantity", body, err, want)
	}
	resp, body = do(t, srv, call{method: "GET", path: resp.Header.Get("Location")})
	var got shown
	if err := json.Unmarshal(body, &got); resp.StatusCode != http.StatusOK || err != nil || !slices.Equal(got.Items, want) {
		t.Errorf("GET the cart: %d %s", resp.StatusCode, body)
	}

	// sku-2 is gone, sku-3 is not: the cart is refused whole.
	resp, body = do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"bob","items":[{"sku":"sku-3","quantity":1},{"sku":"sku-2","quantity":1},{"sku":"sku-1","quantity":2}]}`})
	var p httpapi.Problem
	if err := json.Unmarshal(body, &p); resp.StatusCode != http.StatusConflict || err != nil || p.Type != "sold-out" || !slices.Equal(p.SKUs, []string{"sku-1", "sku-2"}) {
		t.Fatalf("cart past the stock: %d %s; want 409 sold-out naming sku-1 and sku-2", resp.StatusCode, body)
	}
	for sku, left := range map[string]int{"sku-1": 1, "sku-2": 0, "sku-3": 5} {
		if s := stockNamed(t, srv, sku); s.Available != left || s.Sold != s.Initial-left {
			t.Errorf("%s after the refused cart: %+v, want %d left", sku, s, left)
		}
	}

	// A single line's answer lists it too.
	resp, body = do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"user_id":"cat","items":[{"sku":"sku-3","quantity":2}]}`})
	var one shown
	if err := json.Unmarshal(body, &one); resp.StatusCode != http.StatusCreated || err != nil || one.SKU == nil || *one.SKU != "sku-3" || len(one.Items) != 1 {
		t.Errorf("a cart of one line: %d %s; want an order of sku-3 with one item", resp.StatusCode, body)
	}

	resp, body = do(t, srv, call{method: "GET", path: "/api/v1/orders?user_id=ann&sku=sku-2"})
	var page struct {
		Orders []shown `json:"orders"`
	}
	if err := json.Unmarshal(body, &page); resp.StatusCode != http.StatusOK || err != nil || len(page.Orders) != 1 || page.Orders[0].ID != cart.ID || len(page.Orders[0].Items) != 2 {
		t.Errorf("ann's orders of sku-2: %d %s; want the cart, with its lines", resp.StatusCode, body)
	}

	resp, body = do(t, srv, call{method: "POST", path: "/api/v1/orders/" + strconv.FormatInt(cart.ID, 10) + "/refund", body: `{"user_id":"ann"}`})
	if err := json.Unmarshal(body, &got); resp.StatusCode != http.StatusOK || err != nil || got.Status != "refunded" || len(got.Items) != 2 {
		t.Fatalf("refund the cart: %d %s", resp.StatusCode, body)
	}
	for sku, left := range map[string]int{"sku-1": 2, "sku-2": 1} {
		if s := stockNamed(t, srv, sku); s.Available != left || s.Sold != 0 {
			t.Errorf("%s after the refund: %+v, want %d left and none sold", sku, s, left)
		}
	}
}
