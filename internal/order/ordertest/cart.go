package ordertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

const (
	CartBuyers = 300
	CartUnits  = 60 // of each hot SKU
)

// Hot are the SKUs the carts draw from.
var Hot = []string{"hot-a", "hot-b", "hot-c"}

// CartOutcome is what a cart burst's buyers were answered.
type CartOutcome struct {
	Acked   []audit.Acked
	SoldOut map[string]int // refusals naming each SKU short
	Others  []error        // anything else: busy is one
}

// CartBurst puts CartUnits of each hot SKU on sale and releases
// CartBuyers at once, round robin over the instances, each with a cart of
// 2 or 3 hot SKUs in random order, so that both orders of every pair
// occur; every fourth buyer buys one SKU alone. Every request has a
// deadline, so that a deadlock shows as busy answers rather than a hung
// test: a minute, not the shop's 10 s, since under -race on a shared
// 2-core machine the lock strategies, which serve the carts of 3 hot SKUs
// almost one at a time, take longer than 10 s for 300 of them; a
// deadlock never ends, and fails it still.
func CartBurst(t *testing.T, seed uint64, instances ...*order.Service) CartOutcome {
	t.Helper()
	return CartBurstOf(t, Hot, seed, instances...)
}

// CartBurstOf is CartBurst on the SKUs hot.
func CartBurstOf(t *testing.T, hot []string, seed uint64, instances ...*order.Service) CartOutcome {
	t.Helper()
	ctx := t.Context()
	for _, sku := range hot {
		if err := instances[0].DeleteStock(ctx, sku); err != nil && !errors.Is(err, stock.ErrNotFound) {
			t.Fatal(err)
		}
		if _, err := instances[0].SetStock(ctx, sku, CartUnits); err != nil {
			t.Fatal(err)
		}
	}
	rnd := rand.New(rand.NewPCG(seed, 1))
	carts := make([][]order.Line, CartBuyers)
	for i := range carts {
		skus := slices.Clone(hot)
		rnd.Shuffle(len(skus), func(a, b int) { skus[a], skus[b] = skus[b], skus[a] })
		n := 2 + rnd.IntN(2)
		if i%4 == 0 {
			n = 1 // single-SKU buyers among the carts: they queue, and keep leases, as before
		}
		for _, sku := range skus[:n] {
			carts[i] = append(carts[i], order.Line{SKU: sku, Quantity: 1})
		}
	}
	out := CartOutcome{SoldOut: make(map[string]int)}
	var (
		gate = make(chan struct{})
		wg   sync.WaitGroup
		mu   sync.Mutex
	)
	for i, items := range carts {
		wg.Go(func() {
			<-gate
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			o, _, err := instances[i%len(instances)].Place(rctx, order.PlaceRequest{UserID: fmt.Sprintf("user-%d", i), Items: items, IdempotencyKey: fmt.Sprintf("key-%d", i)})
			mu.Lock()
			defer mu.Unlock()
			out.Note(o, items, err)
		})
	}
	close(gate)
	wg.Wait()
	return out
}

// Note counts one cart buyer's answer: the order placed of items, the
// SKUs a sold-out refusal named short, or any other error. Its caller
// holds the lock of out.
func (out *CartOutcome) Note(o order.Order, items []order.Line, err error) {
	var short interface{ Short() []string }
	switch {
	case err == nil:
		skus := make([]string, len(items))
		for i, l := range items {
			skus[i] = l.SKU
		}
		out.Acked = append(out.Acked, audit.Acked{ID: o.ID, SKUs: skus})
	case errors.Is(err, stock.ErrSoldOut) && errors.As(err, &short):
		for _, sku := range short.Short() {
			out.SoldOut[sku]++
		}
	default:
		out.Others = append(out.Others, err)
	}
}

// AuditCarts audits every hot SKU, and counts the orders with some lines
// taken and others not.
func AuditCarts(t *testing.T, gdb *gorm.DB, out CartOutcome) (map[string]audit.Audit, int) {
	t.Helper()
	return AuditCartsOf(t, gdb, Hot, out)
}

// AuditCartsOf is AuditCarts of the SKUs Hot.
func AuditCartsOf(t *testing.T, gdb *gorm.DB, hot []string, out CartOutcome) (map[string]audit.Audit, int) {
	t.Helper()
	total, each, err := audit.SKUs(context.WithoutCancel(t.Context()), gdb, hot, out.SoldOut, out.Acked)
	if err != nil {
		t.Fatal(err)
	}
	audits := make(map[string]audit.Audit)
	for _, a := range each {
		audits[a.SKU] = a
	}
	return audits, total.Partial + total.MissingLines
}
