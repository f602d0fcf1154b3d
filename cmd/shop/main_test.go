package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/config"
)

// TestConfigErrors: bad configuration stops the shop before it listens, with
// an error that names the variable.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no dsn", map[string]string{}, "SHOP_MYSQL_DSN is required"},
		{"bad dsn", map[string]string{"SHOP_MYSQL_DSN": "nope"}, "SHOP_MYSQL_DSN"},
		{"bad strategy", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_STRATEGY": "magic"}, `unknown strategy "magic"`},
		{"bad ttl", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_LOCK_TTL": "soon"}, "SHOP_LOCK_TTL"},
		{"tiny ttl", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_LOCK_TTL": "1ms"}, "below the minimum"},
		{"bad addr", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_HTTP_ADDR": "8080"}, "SHOP_HTTP_ADDR"},
		{"bad zk", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_ZK_ADDRS": "zk1"}, "SHOP_ZK_ADDRS"},
		{"zookeeper without servers", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_STRATEGY": "zookeeper"}, "strategy zookeeper needs a ZooKeeper server (--zk or SHOP_ZK_ADDRS)"},
		{"redlock with one master", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_STRATEGY": "redlock", "SHOP_REDLOCK_ADDRS": "r1:6379"}, "strategy redlock needs SHOP_REDLOCK_ADDRS: at least 3"},
		{"jwt without a key", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_BUYER_AUTH": "jwt"}, "SHOP_BUYER_AUTH=jwt needs SHOP_JWT_SECRET (HS256) or SHOP_JWT_PUBLIC_KEY (RS256 or ES256)"},
		{"bad buyer rate", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_BUYER_RATE": "5"}, "SHOP_BUYER_RATE"},
		{"write timeout within the request's", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_REQUEST_TIMEOUT": "30s"}, "SHOP_HTTP_WRITE_TIMEOUT: 15s must be longer than SHOP_REQUEST_TIMEOUT (30s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			err := run(context.Background(), []string{"serve"}, func(k string) string { return tt.env[k] }, io.Discard, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestSecretsMasked: the start-up log line carries the config without the
// database password, the admin token or the JWT secret.
func TestSecretsMasked(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	env := map[string]string{"SHOP_MYSQL_DSN": "shop:hunter2@tcp(127.0.0.1:1)/shop?timeout=200ms", "SHOP_ADMIN_TOKEN": "tok-secret", "SHOP_HTTP_ADDR": "127.0.0.1:0",
		"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_SECRET": "jwt-secret-of-at-least-32-bytes-long"}
	err := run(t.Context(), []string{"serve"}, func(k string) string { return env[k] }, io.Discard, &stderr)
	if err == nil {
		t.Fatal("serve with no database should fail")
	}
	log := stderr.String()
	if !strings.Contains(log, `"strategy":"atomic"`) {
		t.Fatalf("config not logged: %s", log)
	}
	if strings.Contains(log, "buyer authentication is off") {
		t.Errorf("warned that buyer authentication is off with SHOP_BUYER_AUTH=jwt: %s", log)
	}
	for _, secret := range []string{"hunter2", "tok-secret", "jwt-secret"} {
		if strings.Contains(log, secret) || strings.Contains(err.Error(), secret) {
			t.Errorf("%q leaked: %s %v", secret, log, err)
		}
	}
}

// TestBuyerAuthOffWarns: with buyer authentication off, as by default,
// serve says so at start, and so it does with SHOP_ALLOW_RESET=true.
func TestBuyerAuthOffWarns(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	env := map[string]string{"SHOP_MYSQL_DSN": "shop:x@tcp(127.0.0.1:1)/shop?timeout=200ms", "SHOP_HTTP_ADDR": "127.0.0.1:0", "SHOP_ALLOW_RESET": "true"}
	if err := run(t.Context(), []string{"serve"}, func(k string) string { return env[k] }, io.Discard, &stderr); err == nil {
		t.Fatal("serve with no database should fail")
	}
	for _, warning := range []string{`"level":"WARN","msg":"buyer authentication is off (SHOP_BUYER_AUTH=none)`, `"level":"WARN","msg":"SHOP_ALLOW_RESET=true: `} {
		if log := stderr.String(); !strings.Contains(log, warning) {
			t.Errorf("no warning %s: %s", warning, log)
		}
	}
}

// TestListenDebugTaken: when the debug listener cannot open, listen fails
// and leaves nothing listening on the public address.
func TestListenDebugTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := free.Addr().String()
	free.Close()

	cfg := config.Config{HTTPAddr: public, DebugAddr: taken.Addr().String()}
	err = listen(t.Context(), slog.New(slog.DiscardHandler), cfg, http.NotFoundHandler())
	if err == nil {
		t.Fatal("listen succeeded on a debug address in use")
	}
	ln, err := net.Listen("tcp", public)
	if err != nil {
		t.Fatalf("the public address is still held after listen failed: %v", err)
	}
	ln.Close()
}

// TestStopWaitsOutShutdown: shoptest.Stop, which the process-level tests
// stop a shop with, waits for as long a shutdown as serve takes.
func TestStopWaitsOutShutdown(t *testing.T) {
	if shoptest.ShutdownTimeout != shutdownTimeout {
		t.Errorf("shoptest.ShutdownTimeout is %v, serve's shutdownTimeout %v", shoptest.ShutdownTimeout, shutdownTimeout)
	}
}
