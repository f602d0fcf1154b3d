package httpapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/buyer"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

const (
	secret   = "a test secret of at least 32 bytes, for HS256"
	issuer   = "stockguard-test"
	audience = "shop"
)

// claims are a buyer's valid claims, for the issuer and audience of the
// test verifiers.
func claims(sub string) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "iss": issuer, "aud": audience, "exp": time.Now().Add(time.Hour).Unix()}
}

// sign makes a token, valid or not, as an attacker or an identity provider
// would.
func sign(t testing.TB, method jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

func verifier(t testing.TB, k buyer.Keys) *buyer.Verifier {
	t.Helper()
	k.Issuer, k.Audience = issuer, audience
	v, err := buyer.NewVerifier(k)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// state is what a request may change: the stock, every order, and the
// Idempotency-Keys kept in Redis.
type state struct {
	Stock  stock.Item
	Orders []order.Order
	Keys   []string
}

// data is s without the keys: the database alone.
func (s state) data() state { s.Keys = nil; return s }

func (w *world) state(t testing.TB) state {
	t.Helper()
	var s state
	if err := w.db.Where("sku = ?", "sku-1").Take(&s.Stock).Error; err != nil {
		t.Fatal(err)
	}
	if err := w.db.Order("id").Find(&s.Orders).Error; err != nil {
		t.Fatal(err)
	}
	keys, err := w.client(t).Keys(t.Context(), w.redis.Prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	s.Keys = keys
	return s
}

// TestBuyerAuth: with buyer authentication on, requests without a valid
// token, or acting for another buyer, get their status and change nothing:
// the stock, the orders and the stored Idempotency-Keys read back the same.
func TestBuyerAuth(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "atomic")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := w.serve(t, httpapi.Config{Buyers: verifier(t, buyer.Keys{Secret: []byte(secret)})})
	rs := w.serve(t, httpapi.Config{Buyers: verifier(t, buyer.Keys{PublicKey: &rsaKey.PublicKey})})

	alice, bob := sign(t, jwt.SigningMethodHS256, []byte(secret), claims("alice")), sign(t, jwt.SigningMethodHS256, []byte(secret), claims("bob"))
	resp, body := do(t, hs, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","quantity":1}`, header: bearer(alice)})
	var placed struct{ ID int64 }
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &placed) != nil {
		t.Fatalf("alice's order: %d %s", resp.StatusCode, body)
	}
	refund := fmt.Sprintf("/api/v1/orders/%d/refund", placed.ID)

	expired := claims("alice")
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	noExp := claims("alice")
	delete(noExp, "exp")
	otherAudience := claims("alice")
	otherAudience["aud"] = "another-shop"
	noSub := claims("")
	const order = `{"sku":"sku-1","user_id":"alice","quantity":1}`
	tests := []struct {
		name   string
		srv    string // "hs" or "rs"
		call   call
		status int
		slug   string
	}{
		{"no token", "hs", call{method: "POST", path: "/api/v1/orders", body: order}, 401, "unauthorized"},
		{"not bearer", "hs", call{method: "POST", path: "/api/v1/orders", body: order, header: map[string]string{"Authorization": "Basic YWxpY2U6eA=="}}, 401, "unauthorized"},
		{"malformed token", "hs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer("not.a.jwt")}, 401, "unauthorized"},
		{"bad signature", "hs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer(sign(t, jwt.SigningMethodHS256, []byte(secret+"?"), claims("alice")))}, 401, "unauthorized"},
		{"expired", "hs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer(sign(t, jwt.SigningMethodHS256, []byte(secret), expired))}, 401, "unauthorized"},
		{"no expiry", "hs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer(sign(t, jwt.SigningMethodHS256, []byte(secret), noExp))}, 401, "unauthorized"},
		{"other audience", "hs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer(sign(t, jwt.SigningMethodHS256, []byte(secret), otherAudience))}, 401, "unauthorized"},
		{"no sub", "hs", call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","quantity":1}`, header: bearer(sign(t, jwt.SigningMethodHS256, []byte(secret), noSub))}, 401, "unauthorized"},
		{"alg none", "hs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer(sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("alice")))}, 401, "unauthorized"},
		{"alg none, public key", "rs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer(sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("alice")))}, 401, "unauthorized"},
		{"HS256 signed with the public key", "rs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer(sign(t, jwt.SigningMethodHS256, rsaPEM, claims("alice")))}, 401, "unauthorized"},
		{"HS256 signed with the public key's DER", "rs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer(sign(t, jwt.SigningMethodHS256, der, claims("alice")))}, 401, "unauthorized"},
		{"refund without token", "hs", call{method: "POST", path: refund, body: `{}`}, 401, "unauthorized"},
		{"read without token", "hs", call{method: "GET", path: fmt.Sprintf("/api/v1/orders/%d", placed.ID)}, 401, "unauthorized"},
		{"list without token", "hs", call{method: "GET", path: "/api/v1/orders?user_id=alice"}, 401, "unauthorized"},
		{"order as another user", "hs", call{method: "POST", path: "/api/v1/orders", body: order, header: bearer(bob)}, 403, "forbidden"},
		{"refund as another user", "hs", call{method: "POST", path: refund, body: `{"user_id":"alice"}`, header: bearer(bob)}, 403, "forbidden"},
		{"list as another user", "hs", call{method: "GET", path: "/api/v1/orders?user_id=alice", header: bearer(bob)}, 403, "forbidden"},
		{"another buyer's refund", "hs", call{method: "POST", path: refund, body: `{}`, header: bearer(bob)}, 404, "not-found"},
		{"another buyer's order", "hs", call{method: "GET", path: fmt.Sprintf("/api/v1/orders/%d", placed.ID), header: bearer(bob)}, 404, "not-found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := w.state(t)
			resp, body := do(t, map[string]*httptest.Server{"hs": hs, "rs": rs}[tt.srv], tt.call)
			var p httpapi.Problem
			if resp.StatusCode != tt.status || json.Unmarshal(body, &p) != nil || p.Type != tt.slug {
				t.Fatalf("status %d %s, want %d %s", resp.StatusCode, body, tt.status, tt.slug)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Errorf("Content-Type %q", ct)
			}
			if tt.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			// A request refused before its Idempotency-Key is reserved
			// leaves no key; a 404 is a final answer, kept under the
			// sender's own key like any other.
			after := w.state(t)
			if tt.status == 404 {
				after, before = after.data(), before.data()
			}
			if !reflect.DeepEqual(after, before) {
				t.Errorf("changed:\n%+v\nto\n%+v", before, after)
			}
		})
	}
}

// TestBuyerToken: a valid token acts for its subject, whether the body
// names it or not, with each kind of key.
func TestBuyerToken(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "atomic")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	minted, err := buyer.Mint([]byte(secret), buyer.Token{Subject: "alice", TTL: time.Minute, Issuer: issuer, Audience: audience})
	if err != nil {
		t.Fatal(err)
	}
	other := w.serve(t, httpapi.Config{}) // no buyer authentication
	if resp, got := do(t, other, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"bob","quantity":1}`}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("bob's order: %d %s", resp.StatusCode, got)
	}
	for _, k := range []struct {
		name  string
		keys  buyer.Keys
		token string
	}{
		{"HS256", buyer.Keys{Secret: []byte(secret)}, minted},
		{"RS256", buyer.Keys{PublicKey: &rsaKey.PublicKey}, sign(t, jwt.SigningMethodRS256, rsaKey, claims("alice"))},
		{"ES256", buyer.Keys{PublicKey: &ecKey.PublicKey}, sign(t, jwt.SigningMethodES256, ecKey, claims("alice"))},
	} {
		t.Run(k.name, func(t *testing.T) {
			srv := w.serve(t, httpapi.Config{Buyers: verifier(t, k.keys)})
			var ids []string
			for _, body := range []string{`{"sku":"sku-1","quantity":1}`, `{"sku":"sku-1","user_id":"alice","quantity":1}`} {
				resp, got := do(t, srv, call{method: "POST", path: "/api/v1/orders", body: body, header: bearer(k.token)})
				var o struct {
					ID     int64
					UserID string `json:"user_id"`
				}
				if resp.StatusCode != http.StatusCreated || json.Unmarshal(got, &o) != nil || o.UserID != "alice" {
					t.Fatalf("order %s: %d %s", body, resp.StatusCode, got)
				}
				var row order.Order
				if err := w.db.Take(&row, o.ID).Error; err != nil || row.UserID != "alice" {
					t.Fatalf("order %d in the database: %+v %v", o.ID, row, err)
				}
				ids = append(ids, strconv.FormatInt(o.ID, 10))
			}
			if resp, got := do(t, srv, call{method: "GET", path: "/api/v1/orders/" + ids[0], header: bearer(k.token)}); resp.StatusCode != http.StatusOK {
				t.Errorf("read own order: %d %s", resp.StatusCode, got)
			}
			resp, got := do(t, srv, call{method: "GET", path: "/api/v1/orders?limit=100", header: bearer(k.token)})
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"id":`+ids[1]+`,`) || strings.Contains(string(got), `"user_id":"bob"`) {
				t.Errorf("list own orders: %d %s", resp.StatusCode, got)
			}
			resp, got = do(t, srv, call{method: "POST", path: "/api/v1/orders/" + ids[0] + "/refund", body: `{}`, header: bearer(k.token)})
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"status":"refunded"`) {
				t.Errorf("refund own order: %d %s", resp.StatusCode, got)
			}
		})
	}
}

// TestBuyerRateLimit: one buyer fires 1,000 orders at once, round robin
// over 3 instances that share Redis and the database, at a limit of 5/s
// with a burst of 5. Counted in the database: at least the burst, and at
// most the burst plus 5 a second of the time the whole storm took, a bound
// that a slow machine only loosens. Every other answer is 429 rate-limited
// with Retry-After, and left nothing under its Idempotency-Key: after the
// wait, the same key places the order.
func TestBuyerRateLimit(t *testing.T) {
	t.Parallel()
	const rate, requests, instances = 5, 1000, 3
	w := newWorld(t, "atomic")
	w.reset(t, requests)
	v := verifier(t, buyer.Keys{Secret: []byte(secret)})
	var srvs []*httptest.Server
	for range instances {
		limiter := buyer.NewLimiter(w.client(t), rate, time.Second, w.redis.Prefix, slog.New(slog.DiscardHandler))
		srvs = append(srvs, w.serve(t, httpapi.Config{Buyers: v, Rate: limiter}))
	}
	token := sign(t, jwt.SigningMethodHS256, []byte(secret), claims("bot"))

	type answer struct {
		code              int
		slug, retry, key  string
		replayed, problem bool
	}
	post := func(client *http.Client, url, key string) answer {
		req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/api/v1/orders", strings.NewReader(`{"sku":"sku-1","quantity":1}`))
		if err != nil {
			t.Error(err)
			return answer{}
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return answer{}
		}
		defer resp.Body.Close()
		var p httpapi.Problem
		json.NewDecoder(resp.Body).Decode(&p)
		return answer{code: resp.StatusCode, slug: p.Type, retry: resp.Header.Get("Retry-After"), key: key,
			replayed: resp.Header.Get("Idempotent-Replayed") != "", problem: strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json")}
	}
	// Each request gets its own connection, opened before the gate, so
	// that the storm is the requests and not the connects.
	answers := make([]answer, requests)
	gate := make(chan struct{})
	var ready, wg sync.WaitGroup
	for i := range requests {
		ready.Add(1)
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			url := srvs[i%instances].URL
			if resp, err := client.Get(url + "/healthz"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			ready.Done()
			<-gate
			answers[i] = post(client, url, rand.Text())
		})
	}
	ready.Wait()
	start := time.Now()
	close(gate)
	wg.Wait()
	storm := time.Since(start)

	var orders int64
	if err := w.db.Model(&order.Order{}).Where("user_id = ?", "bot").Count(&orders).Error; err != nil {
		t.Fatal(err)
	}
	most := rate + int64(math.Ceil(rate*storm.Seconds()))
	t.Logf("%d orders of %d requests; the storm took %s, which allows %d", orders, requests, storm.Round(time.Millisecond), most)
	if orders < rate || orders > most {
		t.Errorf("%d orders in the database, want from %d (the burst) to %d", orders, rate, most)
	}
	created, limited, busy := 0, -1, 0
	for i, a := range answers {
		switch {
		case a.code == http.StatusCreated:
			created++
		case a.code == http.StatusTooManyRequests && a.slug == "rate-limited" && a.problem && a.retry != "":
			limited = i
		case a.code == http.StatusServiceUnavailable && a.slug == "busy":
			// Nothing decided: 1,000 requests at once can outlast the
			// deadline on a loaded machine. It stores no key (checked below).
			busy++
		default:
			t.Fatalf("answer %+v, want 201 or 429 rate-limited with Retry-After", a)
		}
	}
	if busy > 0 {
		t.Logf("%d requests answered busy", busy)
	}
	if int64(created) != orders {
		t.Errorf("%d orders acknowledged, %d in the database", created, orders)
	}
	// An order is its key's answer in the database; a request turned away
	// keeps nothing in Redis.
	if keys := w.state(t).Keys; len(keys) != 0 {
		t.Errorf("%d Idempotency-Keys stored in Redis for %d orders, want none: a limited request stored its key", len(keys), orders)
	}
	if limited < 0 {
		t.Fatal("no request was limited")
	}
	seconds, err := strconv.Atoi(answers[limited].retry)
	if err != nil || seconds < 1 {
		t.Fatalf("Retry-After %q, want whole seconds", answers[limited].retry)
	}
	time.Sleep(time.Duration(seconds) * time.Second)
	if a := post(http.DefaultClient, srvs[0].URL, answers[limited].key); a.code != http.StatusCreated || a.replayed {
		t.Errorf("the limited request again, after Retry-After: %+v, want a new order", a)
	}
}

// TestBuyerRateFailsOpen: when the limit's Redis does not answer, orders
// go on, and the shop counts them. The fault is real: nothing listens
// where the limiter's Redis should be.
func TestBuyerRateFailsOpen(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "atomic")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1})
	ln.Close()
	t.Cleanup(func() { gone.Close() })
	srv := w.serve(t, httpapi.Config{Rate: buyer.NewLimiter(gone, 1, time.Hour, w.redis.Prefix, slog.New(slog.DiscardHandler))})
	before := testutil.ToFloat64(metrics.RateFailedOpen)
	for i := range 3 {
		if resp, body := do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"u","quantity":1}`}); resp.StatusCode != http.StatusCreated {
			t.Fatalf("order %d with the limit's Redis down: %d %s", i, resp.StatusCode, body)
		}
	}
	if n := testutil.ToFloat64(metrics.RateFailedOpen) - before; n < 3 {
		t.Errorf("shop_buyer_rate_failed_open_total rose by %v, want at least 3", n)
	}
}

// TestBuyerRateWithoutAuth: with SHOP_BUYER_AUTH=none, the limit is kept
// per user_id that the body names.
func TestBuyerRateWithoutAuth(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "atomic")
	srv := w.serve(t, httpapi.Config{Rate: buyer.NewLimiter(w.client(t), 1, time.Hour, w.redis.Prefix, slog.New(slog.DiscardHandler))})
	for _, step := range []struct {
		user string
		want int
	}{{"ann", 201}, {"ann", 429}, {"bo", 201}} {
		resp, body := do(t, srv, call{method: "POST", path: "/api/v1/orders", body: `{"sku":"sku-1","user_id":"` + step.user + `","quantity":1}`})
		if resp.StatusCode != step.want {
			t.Errorf("%s: %d %s, want %d", step.user, resp.StatusCode, body, step.want)
		}
	}
	if s := stockOf(t, srv); s.Sold != 2 {
		t.Errorf("stock %+v, want 2 sold", s)
	}
}
