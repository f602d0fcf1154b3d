package serve

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
)

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
