package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/httpapi"
)

// BenchmarkEchoOrder is one order through the HTTP stack alone, the
// bench's http-echo, with no network: routing, the Idempotency-Key check,
// the body's decoding and validation and the 201's encoding.
func BenchmarkEchoOrder(b *testing.B) {
	h := httpapi.Echo()
	body := `{"user_id":"buyer-abcdefgh-123456","sku":"bench-hot-sku","quantity":1}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/orders", strings.NewReader(body))
		req.Header["Idempotency-Key"] = []string{"bench-key-0123456789"}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}
