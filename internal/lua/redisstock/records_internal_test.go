package redisstock

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/stock"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestScriptsKeepRecords: lua's scripts keep a key's answer as every
// keeper of keys does, on a real Redis: what reserve.lua, settle.lua and
// load.lua write, under idempotency.Key or idempotency.Field,
// idempotency.Decode reads; and what Go
// writes with idempotency.Record under that key, reserve.lua replays, or
// refuses for another quantity.
func TestScriptsKeepRecords(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: ns.Addr})
	t.Cleanup(func() { rdb.Close() })
	s := New(rdb, ns.Prefix)
	for sku, available := range map[string]int{"gone": 0, "kept": 10} {
		if _, err := s.Load(ctx, sku, Load{Epoch: 1, Available: available, Limited: true}); err != nil {
			t.Fatal(err)
		}
	}
	keep := Refusals{TTL: time.Minute, SoldOut: idempotency.Answer{Kind: idempotency.SoldOut}.Encode(), OverLimit: idempotency.LimitPrefix(2)}
	terms := Terms{Epoch: 1, Limit: 2, Refusals: keep}
	reserve := func(sku, user string, quantity int) (string, string, error) {
		return s.Reserve(ctx, sku, Reservation{UserID: user, Key: "k", Quantity: quantity}, terms)
	}
	record := func(sku, user string) string {
		v, err := rdb.Get(ctx, idempotency.Key(s.tagged(sku), "answer", user, "k")).Result()
		if err != nil {
			t.Fatalf("%s's record of %s: %v", user, sku, err)
		}
		return v
	}
	decoded := func(v, fingerprint, answer string) {
		t.Helper()
		if fp, a, ok := idempotency.Decode(v); !ok || fp != fingerprint || a != answer {
			t.Errorf("record %q decodes as %q %q %v, want %q %q", v, fp, a, ok, fingerprint, answer)
		}
	}

	// Written by the script: a sold-out refusal, and one over the limit
	// with what the user held.
	if _, _, err := reserve("gone", "ann", 1); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("ann's order of gone: %v, want sold out", err)
	}
	decoded(record("gone", "ann"), "1", "s")
	if _, _, err := reserve("kept", "bob", 3); !errors.Is(err, ErrOverLimit) {
		t.Fatalf("bob's order of 3: %v, want over the limit", err)
	}
	decoded(record("kept", "bob"), "3", "l2:0")
	_, kept, _ := idempotency.Decode(record("kept", "bob"))
	if a, err := idempotency.ParseAnswer(kept); err != nil || a != (idempotency.Answer{Kind: idempotency.OverLimit, Limit: 2}) {
		t.Errorf("the script's answer over the limit %q reads as %+v (%v), want the limit 2 and none held", kept, a, err)
	}

	// Written by settle.lua, for an order the database has.
	id, _, err := reserve("kept", "cat", 2)
	if err != nil || id == "" {
		t.Fatalf("cat's order: %q %v, want a reservation", id, err)
	}
	settled := Settlement{Reservation: Reservation{ID: id, UserID: "cat", Key: "k", Quantity: 2}, How: Persisted, Answer: "o7:1"}
	if _, err := s.Settle(ctx, "kept", []Settlement{settled}, true); err != nil {
		t.Fatal(err)
	}
	v, err := rdb.HGet(ctx, s.keys("kept")[kKeys], "cat\nk").Result()
	if err != nil {
		t.Fatal(err)
	}
	decoded(v, "2", "o7:1")

	// Written by load.lua, for an order the database has whose settlement
	// was lost: the record Go gives it.
	id, _, err = reserve("kept", "eve", 1)
	if err != nil || id == "" {
		t.Fatalf("eve's order: %q %v, want a reservation", id, err)
	}
	lost := Settlement{Reservation: Reservation{ID: id, UserID: "eve", Key: "k", Quantity: 1}, How: Persisted, Answer: "o8:2"}
	if _, err := s.Load(ctx, "kept", Load{Epoch: 1, Available: 7, Limited: true, Persisted: []Settlement{lost}}); err != nil {
		t.Fatal(err)
	}
	if v, err = rdb.HGet(ctx, s.keys("kept")[kKeys], idempotency.Field("eve", "k")).Result(); err != nil {
		t.Fatal(err)
	}
	decoded(v, "1", "o8:2")

	// "done", which the release before this one kept for an order the
	// database has, still sends the key to the database.
	if err := rdb.HSet(ctx, s.keys("kept")[kKeys], idempotency.Field("fay", "k"), "done").Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reserve("kept", "fay", 1); !errors.Is(err, ErrLookup) {
		t.Errorf("fay's retry of a key kept as done: %v, want it looked up", err)
	}

	// Written in Go, replayed by the script: to the same request, and
	// refused to one for another quantity.
	if err := rdb.Set(ctx, idempotency.Key(s.tagged("kept"), "answer", "dan", "k"), idempotency.Record("1", "r12"), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sku, user string
		quantity  int
		answer    string
	}{{"gone", "ann", 1, "s"}, {"kept", "bob", 3, "l2:0"}, {"kept", "cat", 2, "o7:1"}, {"kept", "eve", 1, "o8:2"}, {"kept", "dan", 1, "r12"}} {
		if id, answer, err := reserve(tc.sku, tc.user, tc.quantity); id != "" || answer != tc.answer || err != nil {
			t.Errorf("%s's retry: %q %q %v, want the answer %q replayed", tc.user, id, answer, err, tc.answer)
		}
		if _, _, err := reserve(tc.sku, tc.user, tc.quantity+1); !errors.Is(err, idempotency.ErrKeyReused) {
			t.Errorf("%s's key for another quantity: %v, want it reused", tc.user, err)
		}
	}
}
