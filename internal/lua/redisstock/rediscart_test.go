package redisstock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/lua/redisstock"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// newCartStock returns a Stock on a real Redis (miniredis under
// -short), with sku loaded with available units in epoch 1.
func newCartStock(t *testing.T, available int, skus ...string) *redisstock.Stock {
	t.Helper()
	ns := testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: ns.Addr})
	t.Cleanup(func() { rdb.Close() })
	s := redisstock.New(rdb, ns.Prefix)
	for _, sku := range skus {
		if _, err := s.Load(t.Context(), sku, redisstock.Load{Epoch: 1, Available: available}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func availableIn(t *testing.T, s *redisstock.Stock, sku string) int {
	t.Helper()
	st, err := s.State(context.WithoutCancel(t.Context()), sku)
	if err != nil || !st.Exists {
		t.Fatalf("%s: no state (%v)", sku, err)
	}
	return st.Available
}

// TestGiveBackBarrier: a saga's compensation runs behind a barrier per
// saga and line. Given back twice, a line's units return once; given back
// before its reservation, the late reservation is refused and takes
// nothing ("hanging"); a reservation delivered twice takes once; and once
// the cart is persisted, a give-back returns nothing.
func TestGiveBackBarrier(t *testing.T) {
	t.Parallel()
	s := newCartStock(t, 5, "a")
	ctx := t.Context()
	line := []redisstock.CartLine{{SKU: "a", Epoch: 1, Quantity: 2}}
	c := redisstock.Cart{UserID: "ann", Key: "k", Saga: "saga-1"}

	ids, err := s.ReserveCart(ctx, c, line)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.ReserveCart(ctx, c, line)
	if err != nil || again[0] != ids[0] || availableIn(t, s, "a") != 3 {
		t.Fatalf("a reservation delivered twice: %v, %v, %d left; want entry %s and 3 left", again, err, availableIn(t, s, "a"), ids[0])
	}
	if n, err := s.GiveBack(ctx, "a", c.Saga, false); n != 2 || err != nil {
		t.Fatalf("give back: %d, %v; want 2", n, err)
	}
	if n, err := s.GiveBack(ctx, "a", c.Saga, false); n != -1 || err != nil || availableIn(t, s, "a") != 5 {
		t.Fatalf("give back again: %d, %v, %d left; want -1 (a duplicate) and 5 left", n, err, availableIn(t, s, "a"))
	}
	if _, err := s.ReserveCart(ctx, c, line); !errors.Is(err, redisstock.ErrGivenBack) || availableIn(t, s, "a") != 5 {
		t.Fatalf("reserve after the give-back: %v, %d left; want ErrGivenBack and 5 left", err, availableIn(t, s, "a"))
	}

	early := redisstock.Cart{UserID: "bob", Key: "k", Saga: "saga-2"}
	if n, err := s.GiveBack(ctx, "a", early.Saga, false); n != 0 || err != nil {
		t.Fatalf("give back before the reservation: %d, %v; want 0", n, err)
	}
	if _, err := s.ReserveCart(ctx, early, line); !errors.Is(err, redisstock.ErrGivenBack) || availableIn(t, s, "a") != 5 {
		t.Fatalf("the late reservation: %v, %d left; want ErrGivenBack and 5 left", err, availableIn(t, s, "a"))
	}

	done := redisstock.Cart{UserID: "cat", Key: "k", Saga: "saga-3"}
	ids, err = s.ReserveCart(ctx, done, line)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CartDone(ctx, "a", done.Saga); err != nil {
		t.Fatal(err)
	}
	if n, err := s.GiveBack(ctx, "a", done.Saga, false); n != -2 || err != nil || availableIn(t, s, "a") != 3 {
		t.Fatalf("give back a persisted line: %d, %v, %d left; want -2 and 3 left", n, err, availableIn(t, s, "a"))
	}
	st, err := s.State(ctx, "a")
	if err != nil || len(st.Log) != 0 {
		t.Errorf("log after every saga ended: %+v, %v; want it empty", st.Log, err)
	}
}

// TestReserveCartAllOrNone: one script reserves every line or none, and
// names every short SKU.
func TestReserveCartAllOrNone(t *testing.T) {
	t.Parallel()
	s := newCartStock(t, 2, "a", "b", "c")
	ctx := t.Context()
	c := redisstock.Cart{UserID: "ann", Key: "k", Saga: "saga-1"}
	_, err := s.ReserveCart(ctx, c, []redisstock.CartLine{{SKU: "a", Epoch: 1, Quantity: 3}, {SKU: "b", Epoch: 1, Quantity: 1}, {SKU: "c", Epoch: 1, Quantity: 3}})
	var short *stock.ShortError
	if !errors.As(err, &short) || len(short.SKUs) != 2 || short.SKUs[0] != "a" || short.SKUs[1] != "c" {
		t.Fatalf("a cart short of a and c: %v", err)
	}
	for _, sku := range []string{"a", "b", "c"} {
		if n := availableIn(t, s, sku); n != 2 {
			t.Errorf("%s: %d left, want 2: nothing held", sku, n)
		}
	}
	if _, err := s.ReserveCart(ctx, c, []redisstock.CartLine{{SKU: "a", Epoch: 2, Quantity: 1}}); !errors.Is(err, redisstock.ErrStale) {
		t.Errorf("a line of another epoch: %v, want ErrStale", err)
	}
}
