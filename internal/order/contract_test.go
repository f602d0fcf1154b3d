package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

const (
	buyers = 200
	units  = 50
)

// newService returns a Service on a fresh database, guarded by the named
// strategy.
func newService(t *testing.T, strategy string) (*order.Service, *gorm.DB) {
	t.Helper()
	newShop, gdb := instances(t, strategy)
	return newShop(), gdb
}

// instances returns a constructor of shop instances guarded by the named
// strategy, on a fresh database, also returned for the audit. The instances
// share the servers the strategy needs, in a namespace of this test's own
// (see strategytest). Each instance opens connections and locks of its
// own, as a separate process would.
func instances(t *testing.T, name string) (func() *order.Service, *gorm.DB) {
	t.Helper()
	return instancesWith(t, name, nil)
}

// instancesWith is instances on a configuration that set, when not nil,
// changes first. The guard comes from the registry, and the service is
// built as the app builds it.
func instancesWith(t *testing.T, name string, set func(*config.Config)) (func() *order.Service, *gorm.DB) {
	t.Helper()
	s, err := strategy.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strategytest.Config(t, s)
	if set != nil {
		set(&cfg)
	}
	gdb := testinfra.ShopDB(t, cfg.MySQLDSN)
	return func() *order.Service {
		b, p := strategytest.Open(t, s, cfg)
		return order.NewService(b.DB, p, &order.Options{PerUserLimit: cfg.PerUserLimit})
	}, gdb
}

// burst puts units of sku on sale, from nothing, releases buyers at once through a
// start gate, and audits the result from the database. Every buyer must
// buy or be told the stock is sold out.
func burst(t *testing.T, svc *order.Service, gdb *gorm.DB, sku string) audit.Audit {
	t.Helper()
	a, failed := burstOn(t, gdb, sku, svc)
	if len(failed) > 0 {
		t.Errorf("%d buyers failed; first: %v", len(failed), failed[0])
	}
	return a
}

// burstOn is burst with the buyers spread round robin over the instances,
// and the buyers' other errors returned.
func burstOn(t *testing.T, gdb *gorm.DB, sku string, instances ...*order.Service) (audit.Audit, []error) {
	t.Helper()
	ctx := t.Context()
	// A round that follows another on the same SKU starts from nothing.
	if err := instances[0].DeleteStock(ctx, sku); err != nil && !errors.Is(err, stock.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := instances[0].SetStock(ctx, sku, units); err != nil {
		t.Fatal(err)
	}
	acked, soldOut, others := release(ctx, sku, nil, instances...)
	a, err := audit.SKU(context.WithoutCancel(ctx), gdb, sku, soldOut, acked)
	if err != nil {
		t.Fatal(err)
	}
	return a, others
}

// release has buyers, user-<i> with key-<i>, buy one unit of sku each,
// spread round robin over the instances, all at once through a start
// gate, which also lets also run beside them unless it is nil. It returns
// the ids of the orders made, how many buyers were told sold out, and the
// other errors.
func release(ctx context.Context, sku string, also func(), instances ...*order.Service) (acked []int64, soldOut int, others []error) {
	var (
		gate = make(chan struct{})
		wg   sync.WaitGroup
		mu   sync.Mutex
	)
	if also != nil {
		wg.Go(func() {
			<-gate
			also()
		})
	}
	for i := range buyers {
		wg.Go(func() {
			<-gate
			o, _, err := instances[i%len(instances)].Place(ctx, order.PlaceRequest{SKU: sku, UserID: fmt.Sprintf("user-%d", i), Quantity: 1, IdempotencyKey: fmt.Sprintf("key-%d", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				acked = append(acked, o.ID)
			case errors.Is(err, stock.ErrSoldOut):
				soldOut++
			default:
				others = append(others, err)
			}
		})
	}
	close(gate)
	wg.Wait()
	return acked, soldOut, others
}

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
	newShop, gdb := instances(t, s.Name)
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
		a, failed := burstOn(t, gdb, "sku-"+s.Name, shops...)
		if len(failed) > 0 {
			t.Errorf("%d buyers failed; first: %v", len(failed), failed[0])
		}
		if v := a.Violations(); len(v) > 0 {
			t.Errorf("invariants broken: %v", v)
		}
		if a.Orders != units || a.Sold != units || a.Available != 0 {
			t.Errorf("got %d orders, %d sold, %d available; want %d, %d, 0", a.Orders, a.Sold, a.Available, units, units)
		}
	})
}

// TestNoneOversells runs the same burst against the unprotected strategy and
// expects the audit to catch the oversell: this is what shows that the
// contract above can fail. One burst almost always oversells; a few rounds
// make the test reliable.
func TestNoneOversells(t *testing.T) {
	t.Parallel()
	svc, gdb := newService(t, "none")
	const rounds = 5
	for round := range rounds {
		a := burst(t, svc, gdb, "sku-none")
		if a.Oversold > 0 {
			t.Logf("round %d: %d orders for %d units, oversold %d: %v", round, a.Orders, a.Initial, a.Oversold, a.Violations())
			return
		}
	}
	t.Fatalf("no oversell in %d rounds of %d buyers: the contract cannot tell a broken strategy", rounds, buyers)
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
	newShop, gdb := instances(t, "local")
	var shops []*order.Service
	for range processes {
		shops = append(shops, newShop())
	}
	for round := range rounds {
		a, failed := burstOn(t, gdb, "sku-local", shops...)
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
		newShop, gdb := instances(t, s.Name)
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
		newShop, _ := instances(t, s.Name)
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
