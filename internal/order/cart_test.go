package order_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestCartContract: under every guarded strategy, 300 buyers over 3
// instances buy carts of the 3 hot SKUs in random order. No SKU is
// oversold, no order has some lines and not others, every acknowledged
// order has all its rows, and no buyer is answered busy: no deadlock, no
// lock-wait timeout, although both orders of every pair meet.
func TestCartContract(t *testing.T) {
	guarded := slices.DeleteFunc(strategy.All(), func(s strategy.Strategy) bool { return s.Name == "none" }) // TestCartNoneOversells
	strategytest.Each(t, guarded, func(t *testing.T, s strategy.Strategy) {
		n := distributed
		if s.Name == "local" {
			n = 1 // only correct in one process
		}
		shops, gdb := fleetOf(t, s, n)
		out := ordertest.CartBurst(t, 1, shops...)
		if len(out.Others) > 0 {
			t.Errorf("%d buyers answered other than an order or sold out; first: %v", len(out.Others), out.Others[0])
		}
		audits, partial := ordertest.AuditCarts(t, gdb, out)
		for _, sku := range ordertest.Hot {
			a := audits[sku]
			if v := a.Violations(); len(v) > 0 {
				t.Errorf("%s: invariants broken: %v", sku, v)
			}
		}
		if partial > 0 {
			t.Errorf("%d orders have some lines and not others", partial)
		}
		if len(out.Acked) == 0 {
			t.Error("no cart was sold")
		}
	})
}

// TestCartNoneOversells runs the same carts against the unprotected
// strategy and expects the audit to catch an oversell of some SKU: this is
// what shows that TestCartContract can fail.
func TestCartNoneOversells(t *testing.T) {
	t.Parallel()
	newShop, gdb := ordertest.Instances(t, "none")
	shops := []*order.Service{newShop(), newShop(), newShop()}
	const rounds = 5
	for round := range rounds {
		out := ordertest.CartBurst(t, uint64(round), shops...)
		audits, _ := ordertest.AuditCarts(t, gdb, out)
		for _, sku := range ordertest.Hot {
			if a := audits[sku]; a.Oversold > 0 {
				t.Logf("round %d: %s oversold %d: %v", round, sku, a.Oversold, a.Violations())
				return
			}
		}
	}
	t.Fatalf("no oversell in %d rounds of %d carts: the contract cannot tell a broken strategy", rounds, ordertest.CartBuyers)
}

// TestCartWindow walks carts through the payment window under one
// strategy of each kind: a cart paid, one cancelled by its buyer, one past
// its deadline that the expiry job cancels, each as one order, every line
// with it; and the per-user limit, which holds per SKU. Each line's stock
// comes back once, and every order's rows agree.
func TestCartWindow(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"atomic", "batched", "lua", "redis", "dbtable"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			svc, gdb, _ := windowShop(t, name, window) // a limit of 2 per user and SKU
			ctx := t.Context()
			skus := []string{"win-a", "win-b"}
			for _, sku := range skus {
				if _, err := svc.SetStock(ctx, sku, 10); err != nil {
					t.Fatal(err)
				}
			}
			cart := func(user string, a, b int) (order.Order, error) {
				o, _, err := svc.Place(ctx, order.PlaceRequest{UserID: user, IdempotencyKey: "k-" + user,
					Items: []order.Line{{SKU: "win-b", Quantity: b}, {SKU: "win-a", Quantity: a}}})
				return o, err
			}
			paid, err := cart("ann", 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			if paid.Status != order.StatusPending || len(paid.Items) != 2 || paid.Items[0].SKU != "win-a" {
				t.Fatalf("placed %+v, want pending with its 2 lines by SKU", paid)
			}
			cancelled, err := cart("bob", 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			late, err := cart("cid", 2, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cart("dan", 2, 1); err != nil {
				t.Fatal(err)
			}
			if _, _, err := svc.Place(ctx, order.PlaceRequest{UserID: "dan", IdempotencyKey: "k-dan-2",
				Items: []order.Line{{SKU: "win-a", Quantity: 1}, {SKU: "win-b", Quantity: 1}}}); !errors.Is(err, order.ErrLimitReached) {
				t.Errorf("dan's second cart, past 2 of win-a: %v, want ErrLimitReached", err)
			}
			if o, _, err := svc.Pay(ctx, paid.ID, "pay-ann"); err != nil || o.Status != order.StatusPaid || len(o.Items) != 2 {
				t.Fatalf("pay the cart: %+v, %v", o, err)
			}
			if o, _, err := svc.Cancel(ctx, cancelled.ID, "bob", "c-1"); err != nil || o.Status != order.StatusCancelled {
				t.Fatalf("cancel the cart: %+v, %v", o, err)
			}
			time.Sleep(window + 100*time.Millisecond)
			if n, err := svc.Expire(ctx, 0); err != nil || n != 2 {
				t.Errorf("expire: %d, %v; want cid's and dan's carts", n, err)
			}
			if _, _, err := svc.Pay(ctx, late.ID, "pay-cid"); !errors.Is(err, order.ErrOrderExpired) {
				t.Errorf("pay the expired cart: %v, want ErrOrderExpired", err)
			}
			audits, partial := ordertest.AuditCartsOf(t, gdb, skus, ordertest.CartOutcome{})
			if partial > 0 {
				t.Errorf("%d orders have rows in different statuses", partial)
			}
			for sku, left := range map[string]int{"win-a": 9, "win-b": 8} {
				if a := audits[sku]; len(a.Violations()) > 0 || a.Available != left || a.Sold != 10-left {
					t.Errorf("%s: %+v %v; want %d left, the paid cart's", sku, a, a.Violations(), left)
				}
			}
			if got := events(t, gdb); !slices.Equal(got[paid.ID], []string{"placed", "paid"}) ||
				!slices.Equal(got[cancelled.ID], []string{"placed", "cancelled"}) || !slices.Equal(got[late.ID], []string{"placed", "expired"}) {
				t.Errorf("events %v, want one per transition of each cart", got)
			}
		})
	}
}

// TestDeleteStockTakesWholeCarts: deleting a SKU deletes every cart with a
// line of it, whole, and gives its other lines' units back to their SKUs:
// no order is left with some lines and not others.
func TestDeleteStockTakesWholeCarts(t *testing.T) {
	t.Parallel()
	svc, gdb := ordertest.NewService(t, "atomic")
	ctx := t.Context()
	for _, sku := range []string{"del-a", "del-b"} {
		if _, err := svc.SetStock(ctx, sku, 5); err != nil {
			t.Fatal(err)
		}
	}
	cart, _, err := svc.Place(ctx, order.PlaceRequest{UserID: "ann", IdempotencyKey: "k-ann",
		Items: []order.Line{{SKU: "del-a", Quantity: 1}, {SKU: "del-b", Quantity: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	single, _, err := svc.Place(ctx, order.PlaceRequest{SKU: "del-b", UserID: "bob", Quantity: 1, IdempotencyKey: "k-bob"})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteStock(ctx, "del-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx, cart.ID); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("the cart after its SKU was deleted: %v, want not found", err)
	}
	a, err := audit.SKU(ctx, gdb, "del-b", 0, []int64{single.ID})
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Violations(); len(v) > 0 || a.Available != 4 || a.Sold != 1 {
		t.Errorf("del-b: %+v %v; want bob's unit sold and 4 left", a, v)
	}
	_, partial := ordertest.AuditCartsOf(t, gdb, []string{"del-b"}, ordertest.CartOutcome{})
	if partial > 0 {
		t.Errorf("%d partial orders left", partial)
	}
}

// TestCartRefusalKept: a cart refused for stock is kept under its key,
// with the SKUs that were short, where the service keeps its buyers' keys
// (every strategy but lua, which keeps no cart's refusal): a retry once
// stock is back gets the same refusal, replayed; the key used for another
// cart is refused as reused.
func TestCartRefusalKept(t *testing.T) {
	t.Parallel()
	_, gdb := ordertest.Instances(t, "atomic")
	ns := testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: ns.Addr})
	t.Cleanup(func() { rdb.Close() })
	svc := order.NewService(gdb, order.Guarded(stock.NewAtomic(gdb), order.Rules{}), &order.Options{Keys: &order.KeyOptions{Redis: rdb, Prefix: ns.Prefix}})
	ctx := t.Context()
	for sku, n := range map[string]int{"keep-a": 1, "keep-b": 0} {
		if _, err := svc.SetStock(ctx, sku, n); err != nil {
			t.Fatal(err)
		}
	}
	r := order.PlaceRequest{UserID: "ann", IdempotencyKey: "k", Items: []order.Line{{SKU: "keep-b", Quantity: 1}, {SKU: "keep-a", Quantity: 1}}}
	refused := func(what string, replay bool) {
		t.Helper()
		_, replayed, err := svc.Place(ctx, r)
		var short interface{ Short() []string }
		if !errors.As(err, &short) || !slices.Equal(short.Short(), []string{"keep-b"}) || replayed != replay {
			t.Fatalf("%s: %v, replayed %v; want sold out naming keep-b, replayed %v", what, err, replayed, replay)
		}
	}
	refused("the cart", false)
	if _, err := svc.SetStock(ctx, "keep-b", 5); err != nil {
		t.Fatal(err)
	}
	refused("its retry once keep-b is back", true)
	r.Items[0].Quantity = 2
	if _, _, err := svc.Place(ctx, r); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("the key for another cart: %v, want ErrKeyReused", err)
	}
}
