package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/httpapi"
)

// TestSlowBody: a body that has not arrived when the server's read timeout
// passes is answered 408 request-timeout, not 400 for malformed JSON, and
// its connection is closed; nothing is done. An order's body is read first
// by the Idempotency-Key middleware, a stock change's by its handler alone.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "atomic")
	srv := httptest.NewUnstartedServer(w.handler(t, httpapi.Config{AdminToken: token}))
	srv.Config.ReadTimeout = 500 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	for _, tt := range []struct{ name, head string }{
		{"order", "POST /api/v1/orders HTTP/1.1\r\nIdempotency-Key: slow\r\n"},
		{"refund", "POST /api/v1/orders/1/refund HTTP/1.1\r\nIdempotency-Key: slow\r\n"},
		{"stock", "PUT /api/v1/stock/sku-1 HTTP/1.1\r\nAuthorization: Bearer " + token + "\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A bound on the test, should the server never answer.
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			// 7 bytes of the 100 the headers promise, and no more.
			if _, err := fmt.Fprintf(conn, "%sHost: shop\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"sku\":", tt.head); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(conn)
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var p httpapi.Problem
			if resp.StatusCode != http.StatusRequestTimeout || json.Unmarshal(body, &p) != nil || p.Type != "request-timeout" ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || !resp.Close {
				t.Errorf("answer %s %v: %s; want 408 request-timeout, closing the connection", resp.Status, resp.Header, body)
			}
			if n, err := r.Read(make([]byte, 1)); err == nil {
				t.Errorf("the connection carried %d more bytes, want it closed", n)
			}
		})
	}
	if s := stockOf(t, srv); s.Available != 10 || s.Initial != 10 || s.Sold != 0 {
		t.Errorf("stock changed: %+v", s)
	}
}
