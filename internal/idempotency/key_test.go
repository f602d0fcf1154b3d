package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/idempotency"
)

func TestParseKey(t *testing.T) {
	long := strings.Repeat("k", idempotency.MaxKeyLength)
	tests := []struct {
		in, want string
		err      error
	}{
		{"abc", "abc", nil},
		{`"abc"`, "abc", nil},
		{`"a\"b\\c"`, `a"b\c`, nil},
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{long, long, nil},
		{`"` + long + `"`, long, nil},
		{"", "", idempotency.ErrKeyMissing},
		{long + "k", "", idempotency.ErrKeyInvalid},
		{`""`, "", idempotency.ErrKeyInvalid},
		{`"abc`, "", idempotency.ErrKeyInvalid},
		{`"abc"d`, "", idempotency.ErrKeyInvalid},
		{`"a\b"`, "", idempotency.ErrKeyInvalid},
		{`"a b"`, "", idempotency.ErrKeyInvalid},
		{"a b", "", idempotency.ErrKeyInvalid},
		{"tab\tkey", "", idempotency.ErrKeyInvalid},
		{"clé", "", idempotency.ErrKeyInvalid},
	}
	for _, tt := range tests {
		got, err := idempotency.ParseKey(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("ParseKey(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// FuzzParseKey: no input panics, and every accepted key is 1 to 255
// visible ASCII characters that parse the same when sent bare.
func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{"abc", `"abc"`, `"a\"b"`, `"`, `\`, "", "a b", "\x00", "é"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := idempotency.ParseKey(in)
		if err != nil {
			if !errors.Is(err, idempotency.ErrKeyMissing) && !errors.Is(err, idempotency.ErrKeyInvalid) {
				t.Fatalf("ParseKey(%q): unexpected error %v", in, err)
			}
			return
		}
		if len(k) < 1 || len(k) > idempotency.MaxKeyLength {
			t.Fatalf("ParseKey(%q) = %q: length %d", in, k, len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] <= ' ' || k[i] >= 0x7f {
				t.Fatalf("ParseKey(%q) = %q: byte %#x is not visible ASCII", in, k, k[i])
			}
		}
		if k[0] != '"' {
			if again, err := idempotency.ParseKey(k); again != k || err != nil {
				t.Fatalf("bare %q parses as %q, %v", k, again, err)
			}
		}
	})
}

func TestFingerprint(t *testing.T) {
	user, a, ok := idempotency.Fingerprint("POST", "/api/v1/orders", []byte(`{"sku":"s","user_id":"u","quantity":1}`))
	if !ok || user != "u" {
		t.Fatalf("user %q ok %v", user, ok)
	}
	_, b, _ := idempotency.Fingerprint("POST", "/api/v1/orders", []byte(" {\"quantity\":1, \"user_id\":\"u\",\n\"sku\":\"s\"} "))
	if a != b {
		t.Error("field order and spacing changed the fingerprint")
	}
	for _, other := range []struct{ method, path, body string }{
		{"POST", "/api/v1/orders", `{"sku":"s","user_id":"u","quantity":2}`},
		{"POST", "/api/v1/orders", `{"sku":"t","user_id":"u","quantity":1}`},
		{"PUT", "/api/v1/orders", `{"sku":"s","user_id":"u","quantity":1}`},
		{"POST", "/api/v1/orders/1/refund", `{"sku":"s","user_id":"u","quantity":1}`},
	} {
		if _, c, _ := idempotency.Fingerprint(other.method, other.path, []byte(other.body)); c == a {
			t.Errorf("%+v has the same fingerprint", other)
		}
	}
	for _, body := range []string{``, `[]`, `{"user_id":1}`, `{"user_id":"u"`} {
		if _, _, ok := idempotency.Fingerprint("POST", "/", []byte(body)); ok {
			t.Errorf("body %q fingerprinted", body)
		}
	}
	// A body may leave the user to the request's token.
	if user, _, ok := idempotency.Fingerprint("POST", "/", []byte(`{"sku":"s"}`)); !ok || user != "" {
		t.Errorf("body without user_id: user %q, ok %v", user, ok)
	}
}
