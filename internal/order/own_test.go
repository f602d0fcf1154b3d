package order_test

import (
	"context"
	"sync"

	"gorm.io/gorm"

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
			return order.Placement{Guard: q, FirstRead: q, Rules: rules, Placer: &single{guard: stock.NewAtomic(b.DB), db: b.DB}}, nil
		}})
	if err != nil {
		panic(err)
	}
}

// single is the test strategy's placer.
type single struct {
	db    *gorm.DB
	guard stock.Guard
	inner sync.Map // order.Rules to the *order.Service that places by them
	turns sync.Map // SKU to its *sync.Mutex
}

var _ order.Placer = (*single)(nil)

// Place implements order.Placer.
func (s *single) Place(ctx context.Context, r order.PlaceRequest, rules order.Rules) (order.Order, bool, error) {
	inner, _ := s.inner.LoadOrStore(rules, order.NewService(s.db, order.Guarded(s.guard, rules), nil))
	turn, _ := s.turns.LoadOrStore(r.SKU, new(sync.Mutex))
	turn.(*sync.Mutex).Lock()
	defer turn.(*sync.Mutex).Unlock()
	return inner.(*order.Service).Place(ctx, r)
}
