package groupcommit

import (
	"context"
	"fmt"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// Carts in the group commit: every cart of an instance queues under one
// key, and a batch of them is one transaction, which locks the stock rows
// of all their SKUs in ascending order, as every cart and batch of the
// shop takes them (stock.Sorted): a SKU's batch locks its one row, a cart
// without a key takes its rows in ascending order too, and a give-back
// takes none but each row's own UPDATE, in ascending order. So no two
// transactions wait for each other in a circle, on one instance or
// several. Each cart is granted all its lines or none (cartgrant.go).

// cartsKey is the one key under which an instance's carts queue.
const cartsKey = "carts"

// SubmitCart queues r, a cart (Order.Items, two lines or more, in
// ascending SKU order), for the next batch of carts and waits for its
// answer. Whatever comes of it, AfterCarts runs once for r.
func (w *Writer[M]) SubmitCart(r *Request[M]) (order.Order, bool, error) {
	ctx := r.Ctx
	if err := w.carts.Add(cartsKey, r); err != nil {
		a := order.Answer{Err: fmt.Errorf("order: place: %w: %w", stock.ErrBusy, order.ErrClosed)}
		if w.afterCarts != nil {
			w.afterCarts(r.Ctx, []*Request[M]{r}, []order.Answer{a})
		}
		return order.Order{}, false, a.Err
	}
	return r.Wait(ctx)
}

// writeCarts commits one batch of carts.
func (w *Writer[M]) writeCarts(_ string, queued []*Request[M]) {
	w.commit("", queued, decideCarts[M], func(ctx context.Context, answers []order.Answer, _ bool) {
		if w.afterCarts != nil {
			w.afterCarts(ctx, queued, answers)
		}
	})
}
