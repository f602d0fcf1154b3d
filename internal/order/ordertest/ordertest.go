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
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/idempotency"
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
	return PlaceAll(ctx, Requests(sku), also, instances...)
}

// Requests are the orders of Release's buyers.
func Requests(sku string) []order.PlaceRequest {
	requests := make([]order.PlaceRequest, Buyers)
	for i := range requests {
		requests[i] = order.PlaceRequest{SKU: sku, UserID: fmt.Sprintf("user-%d", i), Quantity: 1, IdempotencyKey: fmt.Sprintf("key-%d", i)}
	}
	return requests
}

// PlaceAll places requests, spread round robin over the instances, all at
// once through a start gate, which also lets also run beside them unless
// it is nil. It returns the ids of the orders made, how many were told
// sold out, and the other errors.
func PlaceAll(ctx context.Context, requests []order.PlaceRequest, also func(), instances ...*order.Service) (acked []int64, soldOut int, others []error) {
	return placeAll(ctx, requests, also, false, instances)
}

// PlaceAsClients is PlaceAll with buyers who, told busy, ask again with
// the same key, on the next instance, as a client should: busy says that
// the outcome is not known yet. The shop answers it when a request waits
// past one of its own bounds, such as a Redis pipeline's 5 s, which a
// burst on a loaded machine can outlast; the key keeps a buyer to one
// order however often it asks. A buyer still told busy BusyFor after its
// first attempt is among the others (see AskAgain).
func PlaceAsClients(ctx context.Context, requests []order.PlaceRequest, also func(), instances ...*order.Service) (acked []int64, soldOut int, others []error) {
	return placeAll(ctx, requests, also, true, instances)
}

// BusyFor bounds how long a client of these tests asks again while it is
// told busy: long enough for a loaded machine to serve a burst, short
// enough that a shop that is never anything but busy fails the test.
const BusyFor = 2 * time.Minute

// busyPause is how long such a client waits before it asks again.
const busyPause = 100 * time.Millisecond

// AskAgain makes the attempts of one request, try(0), try(1) and so on,
// while the answer is busy, or that the key's first request is still in
// progress, as a client asks again after either; for BusyFor at most, or
// until ctx ends. It returns the last attempt's error.
func AskAgain(ctx context.Context, try func(attempt int) error) error {
	give := time.Now().Add(BusyFor)
	for attempt := 0; ; attempt++ {
		err := try(attempt)
		if !errors.Is(err, stock.ErrBusy) && !errors.Is(err, idempotency.ErrInProgress) || time.Now().After(give) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(busyPause):
		}
	}
}

// placeAll is PlaceAll, whose buyers ask again when told busy if askAgain.
func placeAll(ctx context.Context, requests []order.PlaceRequest, also func(), askAgain bool, instances []*order.Service) (acked []int64, soldOut int, others []error) {
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
			var o order.Order
			place := func(attempt int) (err error) {
				o, _, err = instances[(i+attempt)%len(instances)].Place(ctx, r)
				return err
			}
			var err error
			if askAgain {
				err = AskAgain(ctx, place)
			} else {
				err = place(0)
			}
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
