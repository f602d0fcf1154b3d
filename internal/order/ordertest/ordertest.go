// Package ordertest runs the order service's bursts in tests: instances
// of a strategy built as the app builds them, on real servers, buyers
// released at once, and the audit of what they bought.
package ordertest

import (
	"context"
	"errors"
	"fmt"
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
	Buyers = 200 // of a burst
	Units  = 50  // on sale in a burst
)

// NewService returns a Service on a fresh database, guarded by the named
// strategy.
func NewService(t *testing.T, strategy string) (*order.Service, *gorm.DB) {
	t.Helper()
	newShop, gdb := Instances(t, strategy)
	return newShop(), gdb
}

// Instances returns a constructor of shop instances guarded by the named
// strategy, on a fresh database, also returned for the audit. The instances
// share the servers the strategy needs, in a namespace of this test's own
// (see strategytest). Each instance opens connections and locks of its
// own, as a separate process would.
func Instances(t *testing.T, name string) (func() *order.Service, *gorm.DB) {
	t.Helper()
	return InstancesWith(t, name, nil)
}

// InstancesWith is Instances on a configuration that set, when not nil,
// changes first. The guard comes from the registry, and the service is
// built as the app builds it.
func InstancesWith(t *testing.T, name string, set func(*config.Config)) (func() *order.Service, *gorm.DB) {
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
		return order.NewService(b.DB, p, nil)
	}, gdb
}

// Buy places user's order of a unit of sku with svc, under the key
// "k-"+user.
func Buy(t *testing.T, svc *order.Service, sku, user string) order.Order {
	t.Helper()
	o, _, err := svc.Place(t.Context(), order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: "k-" + user})
	if err != nil {
		t.Fatalf("%s buys %s: %v", user, sku, err)
	}
	return o
}

// Burst puts units of sku on sale, from nothing, releases buyers at once through a
// start gate, and audits the result from the database. Every buyer must
// buy or be told the stock is sold out.
func Burst(t *testing.T, svc *order.Service, gdb *gorm.DB, sku string) audit.Audit {
	t.Helper()
	a, failed := BurstOn(t, gdb, sku, svc)
	if len(failed) > 0 {
		t.Errorf("%d buyers failed; first: %v", len(failed), failed[0])
	}
	return a
}

// BurstOn is Burst with the buyers spread round robin over the instances,
// and the buyers' other errors returned.
func BurstOn(t *testing.T, gdb *gorm.DB, sku string, instances ...*order.Service) (audit.Audit, []error) {
	t.Helper()
	ctx := t.Context()
	// A round that follows another on the same SKU starts from nothing.
	if err := instances[0].DeleteStock(ctx, sku); err != nil && !errors.Is(err, stock.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := instances[0].SetStock(ctx, sku, Units); err != nil {
		t.Fatal(err)
	}
	acked, soldOut, others := Release(ctx, sku, nil, instances...)
	a, err := audit.SKU(context.WithoutCancel(ctx), gdb, sku, soldOut, acked)
	if err != nil {
		t.Fatal(err)
	}
	return a, others
}

// Release has Buyers buyers, user-<i> with key-<i>, buy one unit of sku
// each, as PlaceAll places them.
func Release(ctx context.Context, sku string, also func(), instances ...*order.Service) (acked []int64, soldOut int, others []error) {
	requests := make([]order.PlaceRequest, Buyers)
	for i := range requests {
		requests[i] = order.PlaceRequest{SKU: sku, UserID: fmt.Sprintf("user-%d", i), Quantity: 1, IdempotencyKey: fmt.Sprintf("key-%d", i)}
	}
	return PlaceAll(ctx, requests, also, instances...)
}

// PlaceAll places requests, spread round robin over the instances, all at
// once through a start gate, which also lets also run beside them unless
// it is nil. It returns the ids of the orders made, how many were told
// sold out, and the other errors.
func PlaceAll(ctx context.Context, requests []order.PlaceRequest, also func(), instances ...*order.Service) (acked []int64, soldOut int, others []error) {
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
	for i, r := range requests {
		wg.Go(func() {
			<-gate
			o, _, err := instances[i%len(instances)].Place(ctx, r)
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
