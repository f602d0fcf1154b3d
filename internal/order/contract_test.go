package order_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
)

// distributed is how many instances of the shop share a strategy that
// needs servers beyond MySQL: several, since that is what its lock is for.
const distributed = 3

// fleet returns the instances that s serves buyers from, on a fresh
// database, also returned for the audit: several when s needs servers
// beyond MySQL, since that is what its lock is for, and one otherwise.
func fleet(t *testing.T, s strategy.Strategy) ([]*order.Service, *gorm.DB) {
	t.Helper()
	if len(s.Needs) > 0 {
		return fleetOf(t, s, distributed)
	}
	return fleetOf(t, s, 1)
}

// fleetOf returns n instances of s on a fresh database, also returned.
func fleetOf(t *testing.T, s strategy.Strategy, n int) ([]*order.Service, *gorm.DB) {
	t.Helper()
	newShop, gdb := ordertest.Instances(t, s.Name)
	shops := []*order.Service{newShop()}
	for len(shops) < n {
		shops = append(shops, newShop())
	}
	return shops, gdb
}

// TestContract releases 200 buyers at once on a stock of 50 under every
// guarded strategy, the lock strategies on their real servers (under
// -short, on SQLite and miniredis, for every strategy that runs there):
// exactly 50 are sold and every invariant holds. A strategy that needs servers beyond
// MySQL serves the buyers from several instances; local and dbtable run as
// one (dbtable's lock needs no more than MySQL, and local is only correct
// in one process).
func TestContract(t *testing.T) {
	guarded := slices.DeleteFunc(strategy.All(), func(s strategy.Strategy) bool { return s.Name == "none" }) // TestNoneOversells
	strategytest.Each(t, guarded, func(t *testing.T, s strategy.Strategy) {
		shops, gdb := fleet(t, s)
		a, failed := ordertest.BurstOn(t, gdb, "sku-"+s.Name, shops...)
		if len(failed) > 0 {
			t.Errorf("%d buyers failed; first: %v", len(failed), failed[0])
		}
		if v := a.Violations(); len(v) > 0 {
			t.Errorf("invariants broken: %v", v)
		}
		if a.Orders != ordertest.Units || a.Sold != ordertest.Units || a.Available != 0 {
			t.Errorf("got %d orders, %d sold, %d available; want %d, %d, 0", a.Orders, a.Sold, a.Available, ordertest.Units, ordertest.Units)
		}
	})
}

// TestNoneOversells runs the same burst against the unprotected strategy and
// expects the audit to catch the oversell: this is what shows that the
// contract above can fail. One burst almost always oversells; a few rounds
// make the test reliable.
func TestNoneOversells(t *testing.T) {
	t.Parallel()
	svc, gdb := ordertest.NewService(t, "none")
	const rounds = 5
	for round := range rounds {
		a := ordertest.Burst(t, svc, gdb, "sku-none")
		if a.Oversold > 0 {
			t.Logf("round %d: %d orders for %d units, oversold %d: %v", round, a.Orders, a.Initial, a.Oversold, a.Violations())
			return
		}
	}
	t.Fatalf("no oversell in %d rounds of %d buyers: the contract cannot tell a broken strategy", rounds, ordertest.Buyers)
}

// TestLocalOversellsAcrossInstances runs the burst against four instances
// of the local strategy, each with the locks of its own process, and
// expects the audit to catch the oversell: a mutex in one process keeps
// out nobody in another, and the instances count their fencing tokens
// apart, so equal tokens get past the fence. Some buyers are also refused
// (a lower token meets a higher one: 503 busy); that is no fix either.
func TestLocalOversellsAcrossInstances(t *testing.T) {
	t.Parallel()
	const processes, rounds = 4, 5
	newShop, gdb := ordertest.Instances(t, "local")
	var shops []*order.Service
	for range processes {
		shops = append(shops, newShop())
	}
	for round := range rounds {
		a, failed := ordertest.BurstOn(t, gdb, "sku-local", shops...)
		for _, err := range failed {
			if !errors.Is(err, stock.ErrFenced) {
				t.Fatalf("a buyer failed other than fenced off: %v", err)
			}
		}
		if a.Oversold > 0 {
			t.Logf("round %d: %d orders for %d units, oversold %d, %d buyers fenced off: %v",
				round, a.Orders, a.Initial, a.Oversold, len(failed), a.Violations())
			return
		}
	}
	t.Fatalf("no oversell in %d rounds across %d instances of local", rounds, processes)
}

// TestRefundThenBuy: under every strategy, a unit that a refund returns on
// one instance is sold at once on another that had just answered sold out.
// Sold-out answers may come without queueing; they must never come from
// what an instance remembers.
func TestRefundThenBuy(t *testing.T) {
	strategytest.Each(t, strategy.All(), func(t *testing.T, s strategy.Strategy) {
		newShop, gdb := ordertest.Instances(t, s.Name)
		a, b := newShop(), newShop()
		ctx := t.Context()
		const sku = "last-one"
		if _, err := a.SetStock(ctx, sku, 1); err != nil {
			t.Fatal(err)
		}
		buy := func(svc *order.Service, user string) (order.Order, error) {
			o, _, err := svc.Place(ctx, order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: "k-" + user})
			return o, err
		}
		first, err := buy(a, "ann")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := buy(b, "bob"); !errors.Is(err, stock.ErrSoldOut) {
			t.Fatalf("B before the refund: %v, want sold out", err)
		}
		if _, _, err := a.Refund(ctx, first.ID, "ann", "refund-ann"); err != nil {
			t.Fatal(err)
		}
		second, err := buy(b, "cat")
		if err != nil {
			t.Fatalf("B right after the refund on A: %v, want the unit", err)
		}
		au, err := audit.SKU(ctx, gdb, sku, 1, []int64{second.ID})
		if err != nil {
			t.Fatal(err)
		}
		if v := au.Violations(); len(v) > 0 || au.Orders != 1 || au.Available != 0 {
			t.Errorf("audit %+v: %v; want 1 live order and none left", au, v)
		}
	})
}

// TestRetryAfterSoldOut: under every strategy, a buyer's retry with the
// same key and request gets its order back, replayed, even once the rest of
// the stock has sold out: a key store that forgot the key (a restarted
// Redis) must not turn the retry into "sold out".
func TestRetryAfterSoldOut(t *testing.T) {
	strategytest.Each(t, strategy.All(), func(t *testing.T, s strategy.Strategy) {
		newShop, _ := ordertest.Instances(t, s.Name)
		svc := newShop()
		ctx := t.Context()
		const sku = "retry"
		if _, err := svc.SetStock(ctx, sku, 2); err != nil {
			t.Fatal(err)
		}
		first := order.PlaceRequest{SKU: sku, UserID: "ann", Quantity: 1, IdempotencyKey: "k-ann"}
		o, _, err := svc.Place(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.Place(ctx, order.PlaceRequest{SKU: sku, UserID: "bob", Quantity: 1, IdempotencyKey: "k-bob"}); err != nil {
			t.Fatal(err)
		}
		again, replayed, err := svc.Place(ctx, first)
		if err != nil || !replayed || again.ID != o.ID {
			t.Fatalf("retry once sold out: order %d, replayed %v, %v; want order %d replayed", again.ID, replayed, err, o.ID)
		}
		// Refunded since, the order is still answered as first placed.
		if _, _, err := svc.Refund(ctx, o.ID, "ann", "refund-ann"); err != nil {
			t.Fatal(err)
		}
		again, replayed, err = svc.Place(ctx, first)
		want, _ := json.Marshal(o)
		if got, _ := json.Marshal(again); err != nil || !replayed || string(got) != string(want) {
			t.Errorf("retry once refunded: %s, replayed %v, %v; want the first answer again, %s", got, replayed, err, want)
		}
	})
}
