package groupcommit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
)

// TestBatchedCartsShareTransactions: 150 buyers at once, on one instance,
// each with a cart of 2 or 3 of 3 SKUs and an Idempotency-Key, for fewer
// units than they ask. The carts commit in batches: the orders of one
// transaction share its created_at, and there are at most half as many
// transactions as carts (one per cart, as before, would be as many). The
// audit is clean and no order has some lines and not others.
func TestBatchedCartsShareTransactions(t *testing.T) {
	t.Parallel()
	newShop, gdb := ordertest.Instances(t, "batched")
	shop := newShop()
	ctx := t.Context()
	skus := []string{"cart-a", "cart-b", "cart-c"}
	for _, sku := range skus {
		if _, err := shop.SetStock(ctx, sku, 100); err != nil {
			t.Fatal(err)
		}
	}
	const buyers = 150
	out := ordertest.CartOutcome{SoldOut: map[string]int{}}
	txs := map[time.Time]bool{} // the created_at of each transaction's orders
	var (
		gate = make(chan struct{})
		wg   sync.WaitGroup
		mu   sync.Mutex
	)
	for i := range buyers {
		items := []order.Line{{SKU: skus[i%3], Quantity: 1}, {SKU: skus[(i+1)%3], Quantity: 1}}
		if i%2 == 0 {
			items = append(items, order.Line{SKU: skus[(i+2)%3], Quantity: 1})
		}
		wg.Go(func() {
			<-gate
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			o, _, err := shop.Place(rctx, order.PlaceRequest{UserID: fmt.Sprintf("user-%d", i), Items: items, IdempotencyKey: "k"})
			mu.Lock()
			defer mu.Unlock()
			out.Note(o, items, err)
			if err == nil {
				txs[o.CreatedAt] = true
			}
		})
	}
	close(gate)
	wg.Wait()
	if len(out.Others) > 0 {
		t.Errorf("%d buyers answered other than an order or sold out; first: %v", len(out.Others), out.Others[0])
	}
	if len(out.Acked) == 0 || len(out.SoldOut) == 0 {
		t.Fatalf("%d carts sold, sold out %v: want both", len(out.Acked), out.SoldOut)
	}
	if 2*len(txs) > len(out.Acked) {
		t.Errorf("%d carts sold in %d transactions, want at most half as many", len(out.Acked), len(txs))
	}
	audits, partial := ordertest.AuditCartsOf(t, gdb, skus, out)
	for _, sku := range skus {
		if v := audits[sku].Violations(); len(v) > 0 {
			t.Errorf("%s: invariants broken: %v", sku, v)
		}
	}
	if partial > 0 {
		t.Errorf("%d orders have some lines and not others", partial)
	}
}
