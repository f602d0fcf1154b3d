package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestServe drives a real `shop serve` through the API, then stops it with
// SIGTERM and expects a clean exit.
func TestServe(t *testing.T) {
	t.Parallel()
	dsn := testinfra.MySQL(t)
	redis := testinfra.Redis(t)
	base, cmd := shoptest.Start(t, "SHOP_MYSQL_DSN="+dsn, "SHOP_REDIS_ADDR="+redis.Addr, "SHOP_REDIS_PREFIX="+redis.Prefix, "SHOP_ADMIN_TOKEN=secret", "SHOP_STRATEGY=pessimistic")

	for _, probe := range []string{"/healthz", "/readyz"} {
		if code, body := shoptest.Send(t, "GET", base+probe, ""); code != http.StatusOK {
			t.Fatalf("%s: %d %s", probe, code, body)
		}
	}
	if code, body := shoptest.Send(t, "PUT", base+"/api/v1/stock/e2e", `{"quantity":3}`, "Authorization", "Bearer secret"); code != http.StatusOK {
		t.Fatalf("put stock: %d %s", code, body)
	}
	var created int
	for i := range 5 {
		code, body := shoptest.Send(t, "POST", base+"/api/v1/orders", fmt.Sprintf(`{"sku":"e2e","user_id":"u%d","quantity":1}`, i), "Idempotency-Key", fmt.Sprint("k", i))
		switch code {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
			if !strings.Contains(body, `"type":"sold-out"`) {
				t.Errorf("409 without sold-out: %s", body)
			}
		default:
			t.Errorf("order %d: %d %s", i, code, body)
		}
	}
	if created != 3 {
		t.Errorf("created %d orders, want 3", created)
	}
	if code, body := shoptest.Send(t, "GET", base+"/api/v1/stock/e2e", ""); code != http.StatusOK || body != `{"sku":"e2e","initial":3,"available":0,"sold":3,"pending":0,"received":3}` {
		t.Errorf("stock: %d %s", code, body)
	}

	shoptest.Stop(t, cmd)
}

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

// TestToken: a `shop serve` with SHOP_BUYER_AUTH=jwt takes the orders of a
// token that `shop token` printed, for its user, and refuses the request
// without it or with one that has expired.
func TestToken(t *testing.T) {
	t.Parallel()
	const secret = "a secret of at least thirty-two bytes"
	env := func(k string) string {
		return map[string]string{"SHOP_JWT_SECRET": secret, "SHOP_JWT_ISSUER": "test-issuer", "SHOP_JWT_AUDIENCE": "test-shop"}[k]
	}
	mint := func(args ...string) string {
		t.Helper()
		var stdout strings.Builder
		if err := shoptest.Run(t.Context(), append([]string{"token"}, args...), env, &stdout, io.Discard); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(stdout.String())
	}
	alice, expired := mint("alice"), mint("--ttl", "1s", "alice")
	s := newShop(t, "SHOP_BUYER_AUTH=jwt", "SHOP_JWT_SECRET="+secret, "SHOP_JWT_ISSUER=test-issuer", "SHOP_JWT_AUDIENCE=test-shop")
	s.putStock(t, "tok", 5)
	time.Sleep(2 * time.Second) // until expired has
	for _, c := range []struct {
		name, auth string
		want       int
	}{{"none", "", 401}, {"expired", "Bearer " + expired, 401}, {"alice", "Bearer " + alice, 201}} {
		code, body := shoptest.Send(t, "POST", s.base+"/api/v1/orders", `{"sku":"tok","quantity":1}`, "Idempotency-Key", c.name, "Authorization", c.auth)
		if code != c.want || (code == 201 && !strings.Contains(body, `"user_id":"alice"`)) {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.want)
		}
	}
	if a := s.audit(t, "tok", 0, nil); a.Sold != 1 {
		t.Errorf("sold %d, want 1", a.Sold)
	}
	for _, args := range [][]string{{}, {"a b"}, {"alice", "bob"}, {"alice", "--ttl", "-1s"}} {
		if err := shoptest.Run(t.Context(), append([]string{"token"}, args...), env, io.Discard, io.Discard); err == nil {
			t.Errorf("shop token %q: no error", args)
		}
	}
	if err := shoptest.Run(t.Context(), []string{"token", "alice"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "SHOP_JWT_SECRET") {
		t.Errorf("shop token without a secret: %v", err)
	}
}
