package order_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
)

// operators and adjustments: two operators each make this many +1
// restocks at once.
const operators, adjustments = 2, 50

// restock is operator op's i-th adjustment of sku: +1, with a key of its
// own.
func restock(sku string, op, i int) stock.Movement {
	key := fmt.Sprintf("op-%d-%d", op, i)
	return stock.Movement{SKU: sku, Delta: 1, Reason: stock.ReasonRestock, Reference: fmt.Sprintf("PO-%d", op), Key: &key}
}

// restockDuringSale puts units of sku on sale, and releases buyers and the
// operators' restocks at once, spread round robin over shops, each
// restock twice. Buyers and operators told busy ask again with the same
// key (ordertest.AskAgain): a burst on a loaded machine outlasts the
// shop's own bounds now and then, and the test is about what the keys
// and the ledger keep, not about how fast. It returns the orders
// acknowledged, the movements the restocks got, and every error but a
// buyer's sold out.
func restockDuringSale(t *testing.T, sku string, shops []*order.Service) (acked []int64, ms []stock.Movement, errs []error) {
	t.Helper()
	ctx := t.Context()
	if _, err := shops[0].SetStock(ctx, sku, ordertest.Units); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		restocks []error
	)
	acked, _, errs = ordertest.PlaceAsClients(ctx, ordertest.Requests(sku), func() {
		var wg sync.WaitGroup
		for op := range operators {
			for i := range adjustments {
				// Each is sent twice at once, to two instances: a retry
				// racing its first attempt, which the key keeps to one.
				for try := range 2 {
					wg.Go(func() {
						var m stock.Movement
						err := ordertest.AskAgain(ctx, func(attempt int) (err error) {
							m, _, err = shops[(op+i+try+attempt)%len(shops)].Adjust(ctx, restock(sku, op, i))
							return err
						})
						mu.Lock()
						defer mu.Unlock()
						ms, restocks = append(ms, m), append(restocks, err)
					})
				}
			}
		}
		wg.Wait()
	}, shops...)
	return acked, ms, append(errs, slices.DeleteFunc(restocks, func(err error) bool { return err == nil })...)
}

// TestRestocksDuringSale: under every guarded strategy, over 3 instances
// (local over one, the only way it is correct), two operators make 50
// concurrent +1 restocks each, with keys of their own, each sent twice at
// once, while 200 buyers buy. Afterwards available + the units of live orders = the sum of the
// movements, exactly; replaying every restock with its key changes
// nothing; and an adjustment below 0, and a stale compare-and-set, are
// refused, changing nothing.
func TestRestocksDuringSale(t *testing.T) {
	guarded := slices.DeleteFunc(strategy.All(), func(s strategy.Strategy) bool { return s.Name == "none" }) // TestNoneLosesRestocks
	strategytest.Each(t, guarded, func(t *testing.T, s strategy.Strategy) {
		n := distributed
		if s.Name == "local" {
			n = 1
		}
		shops, gdb := fleetOf(t, s, n)
		sku := "ledger-" + s.Name
		acked, ms, errs := restockDuringSale(t, sku, shops)
		for _, err := range errs {
			t.Errorf("a buyer or a restock: %v", err)
		}
		before := auditLedger(t, gdb, sku, acked)
		if want := ordertest.Units + operators*adjustments; before.Received != want {
			t.Errorf("received %d, want %d: %d units and %d restocks of 1", before.Received, want, ordertest.Units, operators*adjustments)
		}

		ctx := t.Context()
		for op := range operators {
			for i := range adjustments {
				m, replayed, err := shops[(op+i+1)%len(shops)].Adjust(ctx, restock(sku, op, i))
				if err != nil || !replayed || !slices.ContainsFunc(ms, func(first stock.Movement) bool { return first.ID == m.ID && first.Same(m) }) {
					t.Fatalf("replay of op-%d-%d: %+v, replayed %v, %v; want its first movement", op, i, m, replayed, err)
				}
			}
		}
		short := stock.Movement{SKU: sku, Delta: -(before.Available + 1), Reason: stock.ReasonDamaged, Key: new(string)}
		*short.Key = "too-many"
		if _, _, err := shops[0].Adjust(ctx, short); !errors.Is(err, stock.ErrInsufficient) {
			t.Errorf("an adjustment below 0: %v, want ErrInsufficient", err)
		}
		var stale *stock.NotExpectedError
		if _, err := shops[0].SetStockExpected(ctx, sku, 0, before.Available+1); !errors.As(err, &stale) || stale.Available != before.Available {
			t.Errorf("a stale compare-and-set: %v, want NotExpectedError with %d available", err, before.Available)
		}
		if after := auditLedger(t, gdb, sku, acked); after != before {
			t.Errorf("after the replays and the refusals: %+v\nbefore: %+v", after, before)
		}
	})
}

// TestNoneLosesRestocks runs the same restocks during a sale on the
// unprotected strategy over 3 instances, and expects the audit to catch
// the lost updates: this shows that the test above can fail.
func TestNoneLosesRestocks(t *testing.T) {
	t.Parallel()
	s, err := strategy.Lookup("none")
	if err != nil {
		t.Fatal(err)
	}
	// A lost buyer's unit and a lost restock's can cancel out in one
	// round, and on a loaded machine the race may not show in one: a few
	// rounds make the test reliable (3 missed it once in a full run; the
	// test ends at the first round that shows it). Each has a database of
	// its own, since the buyers' keys are the same.
	const rounds = 8
	for round := range rounds {
		shops, gdb := fleetOf(t, s, distributed)
		sku := fmt.Sprintf("ledger-none-%d", round)
		acked, _, _ := restockDuringSale(t, sku, shops)
		a, err := audit.SKU(context.WithoutCancel(t.Context()), gdb, sku, 0, acked)
		if err != nil {
			t.Fatal(err)
		}
		if a.Drift != 0 || a.Oversold > 0 {
			t.Logf("round %d: %v", round, a.Violations())
			return
		}
	}
	t.Fatalf("no unit unexplained in %d rounds: the ledger's audit cannot tell a broken strategy", rounds)
}

// auditLedger audits sku, failing t on any broken invariant.
func auditLedger(t *testing.T, gdb *gorm.DB, sku string, acked []int64) audit.Audit {
	t.Helper()
	a, err := audit.SKU(context.WithoutCancel(t.Context()), gdb, sku, 0, acked)
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Violations(); len(v) > 0 {
		t.Errorf("invariants broken: %v", v)
	}
	if a.Drift != 0 || a.Available+a.Sold != a.Received {
		t.Errorf("available %d + sold %d != %d received", a.Available, a.Sold, a.Received)
	}
	return a
}
