package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestBatchedAcrossInstances: the contract burst, 200 buyers for 50 units,
// spread over three instances that each commit their own batches.
func TestBatchedAcrossInstances(t *testing.T) {
	t.Parallel()
	newShop, gdb := ordertest.Instances(t, "batched")
	a, failed := ordertest.BurstOn(t, gdb, "sku-batched", newShop(), newShop(), newShop())
	if len(failed) > 0 {
		t.Errorf("%d buyers failed; first: %v", len(failed), failed[0])
	}
	if v := a.Violations(); len(v) > 0 || a.Orders != ordertest.Units || a.Available != 0 {
		t.Errorf("audit %+v: %v; want %d orders and none left", a, v, ordertest.Units)
	}
}

// TestBatchedKeys: buyers who share a key, in one batch or across batches,
// get one order between them; a changed request under the key is refused;
// neither fails the batch.
func TestBatchedKeys(t *testing.T) {
	t.Parallel()
	newShop, gdb := ordertest.Instances(t, "batched")
	svc := newShop()
	ctx := t.Context()
	if _, err := svc.SetStock(ctx, "keys", 100); err != nil {
		t.Fatal(err)
	}
	const n = 20
	type answer struct {
		o        order.Order
		replayed bool
		err      error
	}
	answers := make([]answer, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-gate
			r := order.PlaceRequest{SKU: "keys", UserID: "ann", Quantity: 1, IdempotencyKey: "double-click"}
			if i == n-1 {
				r.Quantity = 2 // the same key for another order
			}
			if i%2 == 0 { // others in batches of their own
				r2 := order.PlaceRequest{SKU: "keys", UserID: fmt.Sprint("other-", i), Quantity: 1, IdempotencyKey: "k"}
				if _, _, err := svc.Place(ctx, r2); err != nil {
					t.Error(err)
				}
			}
			o, replayed, err := svc.Place(ctx, r)
			answers[i] = answer{o, replayed, err}
		})
	}
	close(gate)
	wg.Wait()
	var first order.Order // the one order the key made
	created := 0
	for _, a := range answers {
		if a.err == nil && !a.replayed {
			first = a.o
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d orders created for one key, want 1", created)
	}
	// Whoever came first, every other buyer gets its order replayed, or is
	// refused if it asked for another quantity.
	for i, a := range answers {
		quantity := 1
		if i == n-1 {
			quantity = 2
		}
		switch {
		case a.err == nil && a.o.ID != first.ID:
			t.Errorf("buyer %d got order %d, not the key's order %d", i, a.o.ID, first.ID)
		case quantity != first.Quantity && !errors.Is(a.err, idempotency.ErrKeyReused):
			t.Errorf("buyer %d asked for %d under a key for %d: %v, want reused", i, quantity, first.Quantity, a.err)
		case quantity == first.Quantity && a.err != nil:
			t.Errorf("buyer %d: %v, want the key's order", i, a.err)
		}
	}
	a := auditOf(t, gdb, "keys")
	if v := a.Violations(); len(v) > 0 || a.Orders != 1+n/2 {
		t.Errorf("audit %+v: %v; want %d orders", a, v, 1+n/2)
	}
}

// TestBatchedDeadline: a buyer whose deadline passes while it waits for
// its batch is answered busy; the batch still commits for the buyers who
// wait, and takes nothing for the late one, which had left before it
// decided: the late buyer's retry with the same key gets an order of its
// own.
func TestBatchedDeadline(t *testing.T) {
	t.Parallel()
	newShop, gdb := ordertest.Instances(t, "batched")
	svc := newShop()
	ctx := t.Context()
	if _, err := svc.SetStock(ctx, "slow", 10); err != nil {
		t.Fatal(err)
	}
	tx := gdb.Begin() // a slow transaction holds the stock row
	if err := tx.Exec(`UPDATE stock_items SET updated_at = updated_at WHERE sku = 'slow'`).Error; err != nil {
		t.Fatal(err)
	}
	place := func(ctx context.Context, user string) error {
		_, _, err := svc.Place(ctx, order.PlaceRequest{SKU: "slow", UserID: user, Quantity: 1, IdempotencyKey: "k-" + user})
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { // the batch that waits for the row
		if err := place(ctx, "first"); err != nil {
			t.Error(err)
		}
	})
	time.Sleep(200 * time.Millisecond)
	wg.Go(func() { // the next batch, with a buyer that outlasts the late one
		if err := place(ctx, "patient"); err != nil {
			t.Error(err)
		}
	})
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := place(short, "late"); !errors.Is(err, stock.ErrBusy) {
		t.Errorf("the late buyer: %v, want busy", err)
	}
	tx.Commit()
	wg.Wait()
	o, replayed, err := svc.Place(ctx, order.PlaceRequest{SKU: "slow", UserID: "late", Quantity: 1, IdempotencyKey: "k-late"})
	if err != nil {
		t.Fatal(err)
	}
	a := auditOf(t, gdb, "slow")
	if v := a.Violations(); len(v) > 0 || a.Orders != 3 {
		t.Errorf("audit %+v: %v; want 3 orders", a, v)
	}
	if replayed {
		t.Errorf("the late buyer's retry replayed order %d; want none made for it after it left", o.ID)
	}
}

func auditOf(t *testing.T, gdb *gorm.DB, sku string) audit.Audit {
	t.Helper()
	a, err := audit.SKU(t.Context(), gdb, sku, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestBatchedLimitAndMissing: the per-user limit holds within a batch, and
// an unknown SKU is not found for every buyer.
func TestBatchedLimitAndMissing(t *testing.T) {
	t.Parallel()
	newShop, _ := ordertest.InstancesWith(t, "batched", func(cfg *config.Config) { cfg.PerUserLimit = 2 })
	svc := newShop()
	ctx := t.Context()
	if _, err := svc.SetStock(ctx, "limited", 100); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			_, _, err := svc.Place(ctx, order.PlaceRequest{SKU: "limited", UserID: "greedy", Quantity: 1, IdempotencyKey: fmt.Sprint("k", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				counts["ok"]++
			case errors.Is(err, order.ErrLimitReached):
				counts["limit"]++
			default:
				counts[err.Error()]++
			}
		})
	}
	wg.Wait()
	if counts["ok"] != 2 || counts["limit"] != 28 {
		t.Errorf("answers %v; want 2 orders and 28 over the limit", counts)
	}
	if _, _, err := svc.Place(ctx, order.PlaceRequest{SKU: "nope", UserID: "u", Quantity: 1, IdempotencyKey: "k"}); !errors.Is(err, stock.ErrNotFound) {
		t.Errorf("unknown SKU: %v, want not found", err)
	}
}

// TestBatchedLockWaitRetried: a batch whose row lock wait times out (MySQL
// error 1205) runs again, and its buyer still buys once the row is free.
func TestBatchedLockWaitRetried(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "MySQL's lock wait timeout (error 1205)")
	newShop, gdb := ordertest.InstancesWith(t, "batched", func(cfg *config.Config) { cfg.MySQLDSN += "&innodb_lock_wait_timeout=1" })
	svc := newShop()
	ctx := t.Context()
	if _, err := svc.SetStock(ctx, "held", 1); err != nil {
		t.Fatal(err)
	}
	tx := gdb.Begin()
	if err := tx.Exec(`UPDATE stock_items SET updated_at = updated_at WHERE sku = 'held'`).Error; err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(2500*time.Millisecond, func() { tx.Rollback() }) // past one lock wait
	deadline, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, _, err := svc.Place(deadline, order.PlaceRequest{SKU: "held", UserID: "u", Quantity: 1, IdempotencyKey: "k"}); err != nil {
		t.Fatalf("the buyer behind the held row: %v, want the unit", err)
	}
	if a := auditOf(t, gdb, "held"); a.Orders != 1 || a.Available != 0 {
		t.Errorf("audit %+v, want 1 order and none left", a)
	}
}
