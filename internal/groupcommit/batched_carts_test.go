package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/stock"
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
			var short interface{ Short() []string }
			switch {
			case err == nil:
				out.Acked = append(out.Acked, audit.Acked{ID: o.ID, SKUs: []string{items[0].SKU, items[1].SKU}})
				if len(items) == 3 {
					last := len(out.Acked) - 1
					out.Acked[last].SKUs = append(out.Acked[last].SKUs, items[2].SKU)
				}
				txs[o.CreatedAt] = true
			case errors.Is(err, stock.ErrSoldOut) && errors.As(err, &short):
				for _, sku := range short.Short() {
					out.SoldOut[sku]++
				}
			default:
				out.Others = append(out.Others, err)
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
