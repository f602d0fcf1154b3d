package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/net/http/httpguts"

	"github.com/stockguard/shop/internal/buyer"
	"github.com/stockguard/shop/internal/httpapi"
)

// FuzzOrderRequest sends arbitrary bodies, Idempotency-Keys and
// Authorization headers to the order endpoint of a shop with buyer
// authentication, on real MySQL and Redis: nothing panics, every request
// gets a 2xx or a 4xx, never a 5xx, and an order is only ever placed for
// the subject of a valid token, "u"; no problem's detail speaks Go.
func FuzzOrderRequest(f *testing.F) {
	valid := "Bearer " + sign(f, jwt.SigningMethodHS256, []byte(secret), claims("u"))
	expired := claims("u")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	auths := []string{
		valid,
		"",
		"Bearer ",
		"bearer " + strings.TrimPrefix(valid, "Bearer "),
		"Basic dTpw",
		"Bearer " + sign(f, jwt.SigningMethodHS256, []byte(secret), expired),
		"Bearer " + sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("u")),
		"Bearer " + sign(f, jwt.SigningMethodHS256, []byte(secret+"!"), claims("u")),
		"Bearer " + sign(f, jwt.SigningMethodHS256, []byte(secret), claims("someone else")),
		"Bearer a.b.c",
	}
	seeds := []struct{ body, key string }{
		{`{"sku":"sku-1","user_id":"u","quantity":1}`, "k1"},
		{`{"sku":"sku-1","quantity":1}`, `"k1"`},
		{`{"sku":"sku-1","user_id":"u","quantity":101}`, "k2"},
		{`{"sku":"sku-2","user_id":"u","quantity":1}`, "k3"},
		{`{"sku":"sku-1","user_id":"v","quantity":1}`, "k8"},
		{`{"sku":"sku-1","user_id":"u","quantity":1,"x":1}`, "k4"},
		{`{"sku":"sku-1","user_id":"u","quantity":1}`, ""},
		{`{"sku":"sku-1","user_id":"u","quantity":1}`, `"unterminated`},
		{`{"user_id":{"a":1}}`, "k5"},
		{`[`, "k6"},
		{`null`, "k7"},
		{`{"sku":"sku-1","user_id":"u","quantity":"1"}`, "k10"},
		{`{"sku":"nosuch","user_id":"u","quantity":1}`, "k11"},
		{`{"sku":"sku-1","user_id":"u","quantity":2}`, "k1"},
	}
	for i, s := range seeds {
		f.Add(s.body, s.key, valid)
		f.Add(s.body, s.key, auths[i%len(auths)])
	}
	for _, auth := range auths {
		f.Add(seeds[0].body, "k9", auth)
	}
	w := newWorld(f, "atomic")
	srv := w.serve(f, httpapi.Config{Buyers: verifier(f, buyer.Keys{Secret: []byte(secret)})})
	f.Fuzz(func(t *testing.T, body, key, auth string) {
		if !httpguts.ValidHeaderFieldValue(key) || !httpguts.ValidHeaderFieldValue(auth) {
			t.Skip("no HTTP client can send this header")
		}
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/api/v1/orders", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", auth)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 500 {
			t.Fatalf("body %q, key %q, auth %q: status %d: %s", body, key, auth, resp.StatusCode, got)
		}
		var p httpapi.Problem
		if resp.StatusCode >= 400 && json.Unmarshal(got, &p) == nil && badDetail(p.Detail) != "" {
			t.Fatalf("body %q, key %q, auth %q: detail %q %s", body, key, auth, p.Detail, badDetail(p.Detail))
		}
		var o struct {
			UserID string `json:"user_id"`
		}
		if resp.StatusCode < 300 && (json.Unmarshal(got, &o) != nil || o.UserID != "u") {
			t.Fatalf("body %q, auth %q: an order for someone other than the token's subject: %s", body, auth, got)
		}
	})
}
