package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/httpapi"
)

// TestProblemDetails: a problem's detail says, in the API's words, which
// field was wrong and how: never a Go type, a chain of package prefixes
// or a trailing space.
func TestProblemDetails(t *testing.T) {
	t.Parallel()
	srv := newServer(t, token)
	order := func(body string) call { return call{method: "POST", path: "/api/v1/orders", body: body} }
	reused := map[string]string{"Idempotency-Key": "detail-reused"}
	tests := []struct {
		call   call
		detail string
	}{
		{order(`{"sku":"sku-1","user_id":"u","quantity":"1"}`), "quantity must be a whole number"},
		{order(`{"sku":"sku-1","user_id":"u","quantity":1.5}`), "quantity must be a whole number"},
		{order(`{"sku":"sku-1","user_id":"u","quantity":1e30}`), "quantity must be a whole number"},
		{order(`{"sku":1,"user_id":"u","quantity":1}`), "sku must be a string"},
		{order(`{"user_id":"u","items":{"sku":"sku-1","quantity":1}}`), "items must be an array"},
		{order(`{"user_id":"u","items":[{"sku":"sku-1","quantity":"2"}]}`), "items.quantity must be a whole number"},
		{order(`[1]`), "the body must be a JSON object"},
		{order(`{"sku":"sku-1","user_id":"u","quantity":1,"price":0}`), `unknown field "price"`},
		{order(`{"sku":`), "malformed JSON: the body ends before the JSON object does"},
		{order(`{"sku" "x"}`), "malformed JSON at byte 8: invalid character '\"' after object key"},
		{order(`{"sku":"nosuch","user_id":"u","quantity":1}`), `SKU "nosuch" does not exist`},
		{order(`{"user_id":"u","items":[{"sku":"sku-1","quantity":1},{"sku":"nosuch","quantity":1}]}`), `SKU "nosuch" does not exist`},
		{order(`{"sku":"sku-1","user_id":"u","quantity":11}`), `not enough stock of "sku-1"`},
		{call{method: "GET", path: "/api/v1/orders/999999"}, "order 999999 does not exist"},
		{call{method: "PUT", path: "/api/v1/stock/sku-1", body: `{"quantity":1}`, header: map[string]string{"Authorization": "Bearer nope"}}, "Authorization: Bearer <SHOP_ADMIN_TOKEN> is required"},
		{call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1}`, header: map[string]string{"Idempotency-Key": ""}}, "the Idempotency-Key header is required"},
		{call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1}`, header: reused}, ""},
		{call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":2}`, header: reused},
			"this Idempotency-Key was first used for a different request; send a new request with a new key"},
	}
	for _, tt := range tests {
		resp, body := do(t, srv, tt.call)
		if tt.detail == "" { // the first request of a key
			if resp.StatusCode != 201 {
				t.Fatalf("%s: %d %s", tt.call.body, resp.StatusCode, body)
			}
			continue
		}
		var p httpapi.Problem
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Detail != tt.detail {
			t.Errorf("%s %s %s:\n got detail %q\nwant detail %q", tt.call.method, tt.call.path, tt.call.body, p.Detail, tt.detail)
		}
		if bad := badDetail(p.Detail); bad != "" {
			t.Errorf("%s: detail %q %s", tt.call.body, p.Detail, bad)
		}
	}
}

// badDetail says what is wrong with a problem's detail: Go's words, a
// chain of prefixes, or a trailing space; empty if nothing.
func badDetail(d string) string {
	for _, s := range []string{"Go struct", "json:", ": :", "Go value", "of type "} {
		if strings.Contains(d, s) {
			return "speaks Go: " + s
		}
	}
	if strings.TrimSpace(d) != d {
		return "has spaces around it"
	}
	return ""
}
