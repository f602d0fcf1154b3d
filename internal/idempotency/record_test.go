package idempotency_test

import (
	"testing"

	"github.com/stockguard/shop/internal/idempotency"
)

// TestRecord: a record reads back as the fingerprint and answer it was
// made of, whatever the answer holds; what is no record reads as none.
func TestRecord(t *testing.T) {
	for _, tc := range []struct{ fp, answer string }{
		{"3", "s"}, {"f00d", `{"status":201,"body":"e30="}`}, {"a%7Cb/1", "sa|b\nc"}, {"", ""},
	} {
		fp, answer, ok := idempotency.Decode(idempotency.Record(tc.fp, tc.answer))
		if !ok || fp != tc.fp || answer != tc.answer {
			t.Errorf("Record(%q, %q) decodes as %q %q %v", tc.fp, tc.answer, fp, answer, ok)
		}
	}
	if _, _, ok := idempotency.Decode("1700000000000-0"); ok {
		t.Error("a stream entry's id decodes as a record")
	}
}

// TestKeyLayout: one layout names every key, and no two users, keys or
// scopes share one, whatever a user's id holds.
func TestKeyLayout(t *testing.T) {
	if got, want := idempotency.Key("shop:", "answer", "ann", "k1"), "shop:answer:ann\nk1"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
	seen := map[string][3]string{}
	for _, k := range [][3]string{
		{"order", "ann", "k"}, {"order", "ann\nk", "k"}, {"order", "ann", "k2"}, {"answer", "ann", "k"},
		{"idem/a", "b:c", "k"}, {"idem/a:b", "c", "k"}, {"idem/a%3Ab", "c", "k"}, {"order", "admin\nsku", "k"},
	} {
		key := idempotency.Key("p:", k[0], k[1], k[2])
		if other, dup := seen[key]; dup {
			t.Errorf("%q and %q share the key %q", k, other, key)
		}
		seen[key] = k
	}
}
