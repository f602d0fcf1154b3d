package order

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/stock"
)

// Placement is what the service places orders through, built for it by
// the strategy's registry entry at wiring (internal/strategy). Guard is
// every strategy's. Each other step, when set, is one the strategy makes
// itself; one left nil is filled in by NewService, once, with the
// service's own step on Guard (complete). The service then calls every
// step and never asks which strategy runs: every path an order can take
// is a field here. See "Adding a strategy" in docs/strategies.md.
type Placement struct {
	Guard stock.Guard
	// Rules are the per-user limit and the payment window, made from the
	// configuration at wiring (strategy.Build): the one value that the
	// service applies, and that a strategy with steps of its own is built
	// with.
	Rules Rules
	// FirstRead, when Placer is nil, lets the service's placer of orders
	// with a key make the guard's first read itself, so that it reads the
	// buyer's key with the stock (stock.Queued).
	FirstRead FirstReader
	// Placer places the orders of one SKU that carry an Idempotency-Key:
	// batched and lua, which batch them. It checks its refusals and
	// queues its buyers itself.
	Placer Placer
	// Carts places the carts that carry an Idempotency-Key: batched, and
	// lua, which takes a cart's stock in Redis first; both commit them in
	// batches.
	Carts CartPlacer
	// StoresKeys says that Placer and Carts keep their buyers'
	// Idempotency-Keys themselves, in the step that decides them (lua, in
	// Redis); their answers are those of the service's own keys (keys.go).
	StoresKeys bool
	// KeepFirst keeps a sold-out answer under its key, or returns the
	// key's earlier one, where StoresKeys says the placement keeps the
	// keys: lua's, in Redis. With it, the service answers sold out from
	// its leases (soldout.go).
	KeepFirst KeepFirst
	// Refunder gives an order's units back: lua, which also takes them
	// off what the user holds in Redis.
	Refunder Refunder
	// Restocker changes an existing SKU's stock: lua, whose Redis stock
	// must follow the change.
	Restocker Restocker
	// Sale keeps a SKU's sale outside the database: lua, in Redis.
	Sale Sale
	// Reconcile is background work the app runs on one instance at a
	// time, with the run's fencing token: lua's reconciliation of Redis
	// with the database. Nil for none: the app asks it at wiring.
	Reconcile func(ctx context.Context, token int64) (Reconciliation, error)
	// Close stops and waits for the work the strategy runs in the
	// background by itself (batched's and lua's writers); the service's
	// Close calls it.
	Close func()
}

// Guarded is the placement of a guard that the service wraps under rules,
// with no step of its own.
func Guarded(g stock.Guard, rules Rules) Placement { return Placement{Guard: g, Rules: rules} }

// complete fills in, once, the steps that p leaves to the service: its
// placers on p.Guard (after p.FirstRead, when set), a refund and a stock
// change through p.Guard, no sale outside the database, and nothing to
// close. Where the service keeps its buyers' keys, its keys wrap the
// placers (keys.go).
func (s *Service) complete(p Placement) Placement {
	if p.Placer == nil {
		p.Placer = placeFunc(s.place)
		if p.FirstRead != nil {
			p.Placer = s.placeAfter(p.FirstRead)
		}
	}
	if p.Carts == nil {
		p.Carts = placeFunc(s.place)
	}
	if p.Refunder == nil {
		p.Refunder = guardRefunder{p.Guard}
	}
	if p.Restocker == nil {
		p.Restocker = guardRestocker{p.Guard}
	}
	if p.Sale == nil {
		p.Sale = noSale{}
	}
	if p.Close == nil {
		p.Close = func() {}
	}
	if s.keys != nil && !p.StoresKeys {
		p.Placer, p.Carts = s.keys.around(p.Placer.Place), s.keys.around(p.Carts.PlaceCart)
	}
	for _, l := range s.leases {
		p.Placer = l.around(p.Placer.Place)
	}
	if s.keys != nil || p.StoresKeys {
		p.Placer, p.Carts = counted(p.Placer.Place), counted(p.Carts.PlaceCart)
	}
	return p
}

// placeFunc is a way to place an order with a key, as a Placer and as a
// CartPlacer.
type placeFunc func(ctx context.Context, r PlaceRequest) (Order, bool, error)

// Place implements Placer.
func (f placeFunc) Place(ctx context.Context, r PlaceRequest) (Order, bool, error) { return f(ctx, r) }

// PlaceCart implements CartPlacer.
func (f placeFunc) PlaceCart(ctx context.Context, r PlaceRequest) (Order, bool, error) {
	return f(ctx, r)
}

// guardRefunder gives an order's units back through a guard.
type guardRefunder struct{ stock.Guard }

func (g guardRefunder) Refund(ctx context.Context, o Order, fn stock.Fn) error {
	return g.AdjustLines(ctx, o.Returns(), fn)
}

// guardRestocker changes a SKU's stock under a guard: a change of 0 takes
// whatever guards the SKU, and set then makes the change under it.
type guardRestocker struct{ stock.Guard }

func (g guardRestocker) Restock(ctx context.Context, sku string, set func(tx stock.Tx) (int, error)) error {
	return g.Adjust(ctx, sku, 0, func(tx stock.Tx) error {
		_, err := set(tx)
		return err
	})
}

// noSale keeps nothing of a sale outside the database.
type noSale struct{}

func (noSale) NewSale(*gorm.DB, string) error       { return nil }
func (noSale) Forget(context.Context, string) error { return nil }

// Rules are what a placement applies beyond the stock.
type Rules struct {
	Limit  int           // units of a SKU per user; 0 for none
	Window time.Duration // the payment window; 0 for none
}

// Placer places an order of one SKU with an Idempotency-Key, under the
// placement's Rules.
type Placer interface {
	Place(ctx context.Context, r PlaceRequest) (o Order, replayed bool, err error)
}

// CartPlacer places a cart with an Idempotency-Key, under the placement's
// Rules.
type CartPlacer interface {
	PlaceCart(ctx context.Context, r PlaceRequest) (Order, bool, error)
}

// FirstReader lets a purchase make its first read itself (stock.Queued).
type FirstReader interface {
	AdjustAfter(ctx context.Context, sku string, delta int, first stock.FirstRead, fn stock.Fn) error
}

var _ FirstReader = (*stock.Queued)(nil)

// Refunder gives o's units back, running fn, the order's transition, in
// the transaction that returns them to the database.
type Refunder interface {
	Refund(ctx context.Context, o Order, fn stock.Fn) error
}

// Restocker changes a SKU's stock by what set, run in the database's
// transaction, reports.
type Restocker interface {
	Restock(ctx context.Context, sku string, set func(tx stock.Tx) (delta int, err error)) error
}

// Sale keeps a SKU's sale outside the database.
type Sale interface {
	// NewSale, in the transaction that sets sku up, starts a new sale:
	// nothing kept of an earlier one sells again.
	NewSale(tx *gorm.DB, sku string) error
	// Forget drops what is kept of sku, once that transaction, or the one
	// that deleted it, has committed.
	Forget(ctx context.Context, sku string) error
}

// Reconciliation is what one run of Placement.Reconcile found and did.
type Reconciliation interface {
	Fixed() bool    // whether the run changed anything
	String() string // the run's report, as `shop reconcile` prints it
}

// Close waits for the first reads under way, and closes the strategy's
// placement: its background work ends. A buyer who comes after it is
// answered busy.
func (s *Service) Close() {
	s.reads.Close()
	for _, l := range s.leases {
		l.close()
	}
	s.strategy.Close()
	if s.keys != nil {
		s.keys.pipe.Close()
	}
}

// StoresKeys reports whether the service keeps its buyers'
// Idempotency-Keys for orders, by itself or through its strategy
// (Placement.StoresKeys), so that the caller's key store need not: the
// app asks it at wiring. Place
// then answers as that store would: a retry of the same request (user, SKU
// and quantity) gets its first answer again, replayed, a refusal such as
// sold out included; a key reused for another request is refused
// (idempotency.ErrKeyReused); a key whose first request is still being decided is told
// so (idempotency.ErrInProgress); a busy answer is not kept, so that the retry
// asks again.
func (s *Service) StoresKeys() bool {
	return s.strategy.StoresKeys || s.keys != nil
}
