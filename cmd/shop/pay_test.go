package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/payment"
)

// TestPayCommand: `shop pay` sends the body the callback carries, signed
// so that the shop's check passes, to the order's pay endpoint; it prints
// the answer, and fails on one that is not 2xx or on bad arguments.
func TestPayCommand(t *testing.T) {
	t.Parallel()
	const secret = "a payment secret of at least 32 bytes"
	var got struct{ path, body, signature string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.path, got.body, got.signature = r.Method+" "+r.URL.Path, string(b), r.Header.Get(payment.Header)
		if err := payment.Verify([]byte(secret), got.signature, b, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if strings.Contains(got.body, "expired") {
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"type":"order-expired"}`)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		io.WriteString(w, `{"id":7,"status":"paid"}`)
	}))
	defer srv.Close()
	env := func(k string) string { return map[string]string{"SHOP_PAYMENT_SECRET": secret}[k] }
	pay := func(args ...string) (string, error) {
		var out strings.Builder
		err := run(t.Context(), append([]string{"pay"}, args...), env, &out, io.Discard)
		return out.String(), err
	}

	out, err := pay("7", "pay_1", "--url", srv.URL+"/")
	if err != nil || got.path != "POST /api/v1/orders/7/pay" || got.body != `{"payment_id":"pay_1"}` {
		t.Fatalf("shop pay: %v; sent %+v", err, got)
	}
	if want := "HTTP/1.1 200 OK\nIdempotent-Replayed: true\n\n{\"id\":7,\"status\":\"paid\"}\n"; out != want {
		t.Errorf("printed %q, want %q", out, want)
	}
	// The flags may come first.
	if out, err := pay("--url", srv.URL, "7", "expired"); err == nil || !strings.Contains(err.Error(), "409") ||
		!strings.HasPrefix(out, "HTTP/1.1 409 Conflict\n") || !strings.Contains(out, `{"type":"order-expired"}`) {
		t.Errorf("a 409: printed %q, %v; want the answer printed and an error", out, err)
	}
	if _, err := pay("7", "pay_1", "--url", srv.URL, "--payment-secret", "another secret of at least 32 bytes"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a callback signed with another secret: %v, want the shop's 401", err)
	}
	for _, args := range [][]string{{}, {"7"}, {"0", "p"}, {"x", "p"}, {"7", "a b"}, {"7", "p", "extra"}} {
		if _, err := pay(append(args, "--url", srv.URL)...); err == nil {
			t.Errorf("shop pay %q: no error", args)
		}
	}
	if err := run(t.Context(), []string{"pay", "7", "p", "--url", srv.URL}, func(string) string { return "" }, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "SHOP_PAYMENT_SECRET") {
		t.Errorf("shop pay without a secret: %v", err)
	}
}
