package stock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestFenced: a write under a token is refused, with nothing changed, once
// a higher token has claimed the SKU; the same token may write again (a
// re-entered lease); a reset starts the fence again.
func TestFenced(t *testing.T) {
	t.Parallel()
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	const sku = "fenced"
	if err := stock.Reset(t.Context(), gdb, sku, 10); err != nil {
		t.Fatal(err)
	}
	ran := 0
	take := func(token int64) error {
		return stock.Fenced(t.Context(), gdb, sku, -1, token, func(stock.Tx) error { ran++; return nil })
	}
	steps := []struct {
		token int64
		want  error
	}{
		{5, nil},
		{5, nil},             // the same holder again
		{4, stock.ErrFenced}, // a holder from before
		{9, nil},             // the next holder
		{5, stock.ErrFenced}, // the first one, woken late
		{10, nil}, {11, nil}, {12, nil}, {13, nil}, {14, nil}, {15, nil}, {16, nil},
		{17, stock.ErrSoldOut}, // 10 units sold
	}
	for i, s := range steps {
		if err := take(s.token); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("step %d, token %d: %v, want %v", i, s.token, err, s.want)
		}
	}
	it, err := stock.Get(t.Context(), gdb, sku)
	if err != nil {
		t.Fatal(err)
	}
	if it.Available != 0 || ran != 10 || it.Fence != 17 {
		t.Errorf("available %d, %d orders, fence %d; want 0, 10, 17 (a sold-out attempt claims too)", it.Available, ran, it.Fence)
	}
	if err := stock.Fenced(t.Context(), gdb, "nope", -1, 1, nil); !errors.Is(err, stock.ErrNotFound) {
		t.Errorf("unknown SKU: %v, want ErrNotFound", err)
	}
	if err := stock.Reset(t.Context(), gdb, sku, 1); err != nil {
		t.Fatal(err)
	}
	if err := take(1); err != nil {
		t.Errorf("after a reset, token 1: %v", err)
	}
}

// TestLockServerDown: with the lock's Redis stopped, an order is busy (503,
// retry) and takes nothing.
func TestLockServerDown(t *testing.T) {
	t.Parallel()
	srv := testinfra.StartRedis(t)
	dsn := testinfra.MySQL(t)
	gdb := testinfra.ShopDB(t, dsn)
	if err := stock.Reset(t.Context(), gdb, "down", 3); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	guard := strategytest.Guard(t, "redis", &backend.Backends{DB: gdb, Redis: rdb},
		map[string]string{"SHOP_MYSQL_DSN": dsn, "SHOP_REDIS_ADDR": srv.Addr()})
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	err := guard.Adjust(ctx, "down", -1, func(stock.Tx) error { return nil })
	if !errors.Is(err, stock.ErrBusy) {
		t.Fatalf("Adjust with the lock server down = %v, want ErrBusy", err)
	}
	if it, err := stock.Get(t.Context(), gdb, "down"); err != nil || it.Available != 3 {
		t.Errorf("available %d (%v), want 3", it.Available, err)
	}
}

// TestLockServerRestartsEmpty: a Redis lock's server restarted without its
// data counts tokens from 1 again, below the SKU's fence. The next buyer
// still sells at once, its lease raised past the fence, and a holder from
// before the restart stays fenced off.
func TestLockServerRestartsEmpty(t *testing.T) {
	t.Parallel()
	srv := testinfra.StartRedis(t)
	dsn := testinfra.MySQL(t)
	gdb := testinfra.ShopDB(t, dsn)
	const sku = "restarted"
	if err := stock.Reset(t.Context(), gdb, sku, 10); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	guard := strategytest.Guard(t, "redis", &backend.Backends{DB: gdb, Redis: rdb},
		map[string]string{"SHOP_MYSQL_DSN": dsn, "SHOP_REDIS_ADDR": srv.Addr()})
	sell := func() error { return guard.Adjust(t.Context(), sku, -1, func(stock.Tx) error { return nil }) }
	for range 3 {
		if err := sell(); err != nil {
			t.Fatal(err)
		}
	}
	before, err := stock.Get(t.Context(), gdb, sku)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill() // no snapshot: it restarts empty
	srv.Start()
	if n, err := rdb.DBSize(t.Context()).Result(); err != nil || n != 0 {
		t.Fatalf("Redis restarted with %d keys (%v), want none", n, err)
	}
	if err := sell(); err != nil {
		t.Fatalf("first sale after the restart: %v, want it sold", err)
	}
	it, err := stock.Get(t.Context(), gdb, sku)
	if err != nil {
		t.Fatal(err)
	}
	if it.Available != 6 || it.Fence <= before.Fence {
		t.Errorf("available %d, fence %d (was %d); want 6, and a fence above the old one", it.Available, it.Fence, before.Fence)
	}
	if err := stock.Fenced(t.Context(), gdb, sku, -1, before.Fence, nil); !errors.Is(err, stock.ErrFenced) {
		t.Errorf("a holder from before the restart: %v, want ErrFenced", err)
	}
}
