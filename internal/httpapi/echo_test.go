package httpapi_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stockguard/shop/internal/httpapi"
)

// TestEcho: the bench's http-echo ceiling decodes and validates an order as
// the shop does, so it costs what the shop's HTTP stack costs.
func TestEcho(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(httpapi.Echo())
	t.Cleanup(srv.Close)
	tests := []struct {
		name string
		c    call
		want int
		typ  string
	}{
		{"order", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"phone","user_id":"ann","quantity":1}`}, 201, ""},
		{"bad quantity", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"phone","user_id":"ann","quantity":0}`}, 400, "invalid-request"},
		{"unknown field", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"phone","user_id":"ann","quantity":1,"x":1}`}, 400, "invalid-request"},
		{"no key", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"phone","user_id":"ann","quantity":1}`, header: map[string]string{"Idempotency-Key": ""}}, 400, "idempotency-key-missing"},
		{"put stock", call{method: "PUT", path: "/api/v1/stock/phone", body: `{"quantity":5}`}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, srv, tt.c)
			var got struct {
				Type string `json:"type"`
				ID   int64  `json:"id"`
			}
			json.Unmarshal(body, &got)
			if resp.StatusCode != tt.want || got.Type != tt.typ {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, body, tt.want, tt.typ)
			}
			if tt.want == 201 && got.ID < 1 {
				t.Errorf("201 without an order id: %s", body)
			}
		})
	}
}
