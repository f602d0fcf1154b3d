package stock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// counting counts the changes that reach a real guard.
type counting struct {
	stock.Guard
	calls atomic.Int32
}

func (c *counting) Adjust(ctx context.Context, sku string, delta int, fn stock.Fn) error {
	c.calls.Add(1)
	return c.Guard.Adjust(ctx, sku, delta, fn)
}

// TestQueuedSoldOutDoesNotQueue: a buyer who comes once the stock is gone
// is told at once, and buyers already waiting when the last unit goes are
// told together, without reaching the guard in turn.
func TestQueuedSoldOutDoesNotQueue(t *testing.T) {
	t.Parallel()
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	if err := stock.Reset(t.Context(), gdb, "hot", 1); err != nil {
		t.Fatal(err)
	}
	// Queued's own mechanics, in front of a guard the test counts: the
	// registry's atomic is the same Queued, with a guard that cannot be
	// counted.
	inner := &counting{Guard: stock.NewAtomic(gdb)}
	q := stock.NewQueued(gdb, inner)

	// Another transaction holds the row and will take its last unit: the
	// first buyer waits at the guard, the rest in the queue.
	tx := gdb.Begin()
	if err := tx.Exec(`UPDATE stock_items SET available = 0 WHERE sku = 'hot'`).Error; err != nil {
		t.Fatal(err)
	}
	const waiters = 50
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() { errs <- q.Adjust(t.Context(), "hot", -1, func(stock.Tx) error { return nil }) })
	}
	testinfra.WaitFor(t, "a buyer at the guard", func() bool { return inner.calls.Load() == 1 })
	// Every buyer read the unit the transaction has not taken yet: each
	// queues behind the first. A buyer not yet queued when the first is
	// told sold out would be one that came after it.
	testinfra.WaitFor(t, "every buyer in the queue", func() bool { return q.InQueue("hot") == waiters })
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, stock.ErrSoldOut) {
			t.Errorf("a waiter got %v, want sold out", err)
		}
	}
	told := inner.calls.Load()
	if told != 1 {
		t.Errorf("%d changes reached the guard; want 1: the waiters should have been told together", told)
	}

	// Now sold out: the next buyer does not reach the guard at all.
	if err := q.Adjust(t.Context(), "hot", -1, func(stock.Tx) error { return nil }); !errors.Is(err, stock.ErrSoldOut) {
		t.Errorf("after the sell-out: %v, want sold out", err)
	}
	if n := inner.calls.Load(); n != told {
		t.Errorf("%d changes reached the guard after the sell-out; want none more", n-told)
	}
}

// TestQueuedRefundSellableAtOnce: a unit returned on one instance is
// sellable at once on another that had just answered sold out.
func TestQueuedRefundSellableAtOnce(t *testing.T) {
	t.Parallel()
	dsn := testinfra.MySQL(t)
	gdb := testinfra.ShopDB(t, dsn)
	if err := stock.Reset(t.Context(), gdb, "hot", 1); err != nil {
		t.Fatal(err)
	}
	// Two instances of atomic, the registry's: Queued in front of it.
	env := map[string]string{"SHOP_MYSQL_DSN": dsn}
	a := strategytest.Guard(t, "atomic", &backend.Backends{DB: gdb}, env)
	b := strategytest.Guard(t, "atomic", &backend.Backends{DB: gdb}, env)
	noop := func(stock.Tx) error { return nil }
	if err := a.Adjust(t.Context(), "hot", -1, noop); err != nil {
		t.Fatal(err)
	}
	if err := b.Adjust(t.Context(), "hot", -1, noop); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("B before the refund: %v, want sold out", err)
	}
	if err := a.Adjust(t.Context(), "hot", 1, noop); err != nil {
		t.Fatal(err)
	}
	if err := b.Adjust(t.Context(), "hot", -1, noop); err != nil {
		t.Errorf("B right after the refund on A: %v, want the unit", err)
	}
}
