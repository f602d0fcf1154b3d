package app_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/config"
)

// TestServerHeaderLimit: headers of a few KiB, a buyer's JWT among them,
// pass; headers past 16 KiB are refused before the handler, 431.
func TestServerHeaderLimit(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := app.Server(config.Config{}, "", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	for _, tt := range []struct {
		size int
		want int
	}{{4 << 10, http.StatusOK}, {24 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
		req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+ln.Addr().String()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("x", tt.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%d bytes of headers: %s, want %d", tt.size, resp.Status, tt.want)
		}
	}
}
