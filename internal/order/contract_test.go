package order_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

const (
	buyers = 200
	units  = 50
)

// newService returns a Service on a fresh database, guarded by the named
// strategy.
func newService(t *testing.T, strategy string) (*order.Service, *gorm.DB) {
	t.Helper()
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	s, err := app.Lookup(strategy)
	if err != nil {
		t.Fatal(err)
	}
	guard, err := s.New(app.Backends{DB: gdb}, config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return order.NewService(gdb, guard, nil), gdb
}

// burst sets the stock of sku to units, releases buyers at once through a
// start gate, and audits the result from the database.
func burst(t *testing.T, svc *order.Service, gdb *gorm.DB, sku string) loadtest.Audit {
	t.Helper()
	ctx := t.Context()
	if _, err := svc.ResetStock(ctx, sku, units); err != nil {
		t.Fatal(err)
	}
	var (
		gate    = make(chan struct{})
		wg      sync.WaitGroup
		mu      sync.Mutex
		acked   []int64
		soldOut int
		others  []error
	)
	for i := range buyers {
		wg.Go(func() {
			<-gate
			o, _, err := svc.Place(ctx, order.PlaceRequest{SKU: sku, UserID: fmt.Sprintf("user-%d", i), Quantity: 1, IdempotencyKey: fmt.Sprintf("key-%d", i)})
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
	if len(others) > 0 {
		t.Errorf("%d buyers failed; first: %v", len(others), others[0])
	}
	a, err := loadtest.AuditSKU(context.WithoutCancel(ctx), gdb, sku, soldOut, acked)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestContract releases 200 buyers at once on a stock of 50 under every
// guarded strategy: exactly 50 are sold and every invariant holds.
func TestContract(t *testing.T) {
	for _, s := range app.Strategies {
		if s.Name == "none" || len(s.Needs) > 0 {
			continue // none: TestNoneOversells; servers beyond MySQL: the lock tests
		}
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			svc, gdb := newService(t, s.Name)
			a := burst(t, svc, gdb, "sku-"+s.Name)
			if v := a.Violations(); len(v) > 0 {
				t.Errorf("invariants broken: %v", v)
			}
			if a.Orders != units || a.Sold != units || a.Available != 0 {
				t.Errorf("got %d orders, %d sold, %d available; want %d, %d, 0", a.Orders, a.Sold, a.Available, units, units)
			}
		})
	}
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
