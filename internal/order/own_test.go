package order_test

import (
	"context"
	"sync"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
)

// single is a strategy of this test's own that places its own orders, to
// show the seam a strategy outside internal/order plugs into: its registry
// entry builds a placement whose Placer the service calls, and nothing
// else in the shop knows of it. Registered here, it runs in every suite of
// this package that reads the registry, the contract among them.
//
// Its placer lets one buyer of a SKU at a time in its process reach an
// inner service on the atomic guard; its guard, for refunds, carts and
// stock changes, is atomic behind stock.Queued.
func init() {
	err := strategy.Register(strategy.Strategy{Name: "test-single", Ceiling: strategy.SQLAtomic,
		Own: func(b *backend.Backends, _ config.Config, rules order.Rules) (order.Placement, error) {
			q := stock.NewQueued(b.DB, stock.NewAtomic(b.DB))
			inner := order.NewService(b.DB, order.Guarded(stock.NewAtomic(b.DB), rules), nil)
			return order.Placement{Guard: q, FirstRead: q, Rules: rules, Placer: &single{inner: inner}}, nil
		}})
	if err != nil {
		panic(err)
	}
}

// single is the test strategy's placer.
type single struct {
	inner *order.Service // on the atomic guard, under the placement's rules
	turns sync.Map       // SKU to its *sync.Mutex
}

var _ order.Placer = (*single)(nil)

// Place implements order.Placer.
func (s *single) Place(ctx context.Context, r order.PlaceRequest) (order.Order, bool, error) {
	turn, _ := s.turns.LoadOrStore(r.SKU, new(sync.Mutex))
	turn.(*sync.Mutex).Lock()
	defer turn.(*sync.Mutex).Unlock()
	return s.inner.Place(ctx, r)
}
