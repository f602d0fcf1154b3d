package groupcommit

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestBatchedDrainsWhenSoldOut: buyers queued behind the batch that sells
// the last unit learn sold out from it, with no transaction of their own;
// one of them whose key that batch used gets its order replayed.
func TestBatchedDrainsWhenSoldOut(t *testing.T) {
	t.Parallel()
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	// Not through the registry: the test reads the group-commit writer's
	// queue inside *Batched, which the registry's guard does not show.
	b := NewBatched(gdb, order.Rules{})
	svc := order.NewService(gdb, b.Placement(), nil)
	ctx := t.Context()
	if err := stock.Reset(ctx, gdb, "last", 1); err != nil {
		t.Fatal(err)
	}
	version := func() int64 {
		it, err := stock.Get(ctx, gdb, "last")
		if err != nil {
			t.Fatal(err)
		}
		return it.Version
	}
	before := version()
	queued := func() int { // -1 while no writer runs
		if n, out := b.w.skus.Queued("last"); out {
			return n
		}
		return -1
	}
	waitQueued := func(n int) {
		testinfra.WaitFor(t, fmt.Sprint(n, " buyers queued"), func() bool { return queued() == n })
	}

	tx := gdb.Begin() // holds the stock row until the buyers have queued
	if err := tx.Exec(`UPDATE stock_items SET updated_at = updated_at WHERE sku = 'last'`).Error; err != nil {
		t.Fatal(err)
	}
	place := func(user, key string) (order.Order, bool, error) {
		return svc.Place(ctx, order.PlaceRequest{SKU: "last", UserID: user, Quantity: 1, IdempotencyKey: key})
	}
	var first order.Order
	var wg sync.WaitGroup
	wg.Go(func() {
		var err error
		if first, _, err = place("first", "k"); err != nil {
			t.Error(err)
		}
	})
	waitQueued(0) // the writer has taken the first buyer, and waits for the row

	const n = 30
	answers := make([]order.Answer, n)
	for i := range n {
		wg.Go(func() {
			user, key := fmt.Sprint("late-", i), "k"
			if i == 0 {
				user = "first" // a second click of the first buyer
			}
			answers[i].Order, answers[i].Replayed, answers[i].Err = place(user, key)
		})
	}
	waitQueued(n)
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	if a := version() - before; a != 1 {
		t.Errorf("%d transactions took the stock row, want 1: the queued buyers must not queue on it", a)
	}
	if !answers[0].Replayed || answers[0].Order.ID != first.ID {
		t.Errorf("the first buyer's second click: %+v, want order %d replayed", answers[0], first.ID)
	}
	for i, a := range answers[1:] {
		if !errors.Is(a.Err, stock.ErrSoldOut) {
			t.Errorf("queued buyer %d: %+v, want sold out", i+1, a)
		}
	}
}

// TestBatchedClose: Close waits for the writers, and a buyer who comes
// after it is answered busy, with nothing taken.
func TestBatchedClose(t *testing.T) {
	t.Parallel()
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	b := NewBatched(gdb, order.Rules{})
	svc := order.NewService(gdb, b.Placement(), nil)
	ctx := t.Context()
	if err := stock.Reset(ctx, gdb, "closing", 2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Place(ctx, order.PlaceRequest{SKU: "closing", UserID: "ann", Quantity: 1, IdempotencyKey: "k-ann"}); err != nil {
		t.Fatal(err)
	}
	svc.Close()
	if _, running := b.w.skus.Queued("closing"); running {
		t.Error("the SKU's writer runs after Close")
	}
	_, _, err := svc.Place(ctx, order.PlaceRequest{SKU: "closing", UserID: "bob", Quantity: 1, IdempotencyKey: "k-bob"})
	if !errors.Is(err, stock.ErrBusy) {
		t.Errorf("a buyer after Close: %v, want busy", err)
	}
	if it, err := stock.Get(ctx, gdb, "closing"); err != nil || it.Available != 1 {
		t.Errorf("available %d, %v; want 1: the buyer after Close took nothing", it.Available, err)
	}
}
