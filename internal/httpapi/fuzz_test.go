package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzOrderRequest sends arbitrary bodies and Idempotency-Keys to the order
// endpoint of a shop on real MySQL and Redis: nothing panics, and every
// request gets a 2xx or a 4xx, never a 5xx.
func FuzzOrderRequest(f *testing.F) {
	seeds := []struct{ body, key string }{
		{`{"sku":"sku-1","user_id":"u","quantity":1}`, "k1"},
		{`{"sku":"sku-1","user_id":"u","quantity":1}`, `"k1"`},
		{`{"sku":"sku-1","user_id":"u","quantity":101}`, "k2"},
		{`{"sku":"sku-2","user_id":"u","quantity":1}`, "k3"},
		{`{"sku":"sku-1","user_id":"u","quantity":1,"x":1}`, "k4"},
		{`{"sku":"sku-1","user_id":"u","quantity":1}`, ""},
		{`{"sku":"sku-1","user_id":"u","quantity":1}`, `"unterminated`},
		{`{"user_id":{"a":1}}`, "k5"},
		{`[`, "k6"},
		{`null`, "k7"},
	}
	for _, s := range seeds {
		f.Add(s.body, s.key)
	}
	srv := newServer(f, token)
	f.Fuzz(func(t *testing.T, body, key string) {
		if !httpguts.ValidHeaderFieldValue(key) {
			t.Skip("no HTTP client can send this header")
		}
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/api/v1/orders", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 500 {
			t.Fatalf("body %q, key %q: status %d: %s", body, key, resp.StatusCode, got)
		}
	})
}
