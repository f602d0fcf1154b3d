package order

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/stock"
)

// Placement is what the service places orders through, built for it by
// the strategy's registry entry at wiring (internal/strategy). Guard is
// every strategy's: the service's own placement wraps it, and its
// give-backs and stock changes go through it. Each other field, when set,
// is a step the strategy makes itself in place of the service; nil means
// the service makes it. The service never asks a strategy what else it
// can do: every path an order can take is a field here. See "Adding a
// strategy" in docs/strategies.md.
type Placement struct {
	Guard stock.Guard
	// Rules are the per-user limit and the payment window that the
	// service applies, and a strategy that places its own orders is built
	// with: one value, made from the configuration at wiring
	// (strategy.Build).
	Rules Rules
	// FirstRead lets a purchase make the guard's first read itself, so
	// that the service reads the buyer's key with the stock
	// (stock.Queued).
	FirstRead FirstReader
	// Placer places the orders of one SKU that carry an Idempotency-Key:
	// batched and lua, which batch them. It checks its refusals and
	// queues its buyers itself.
	Placer Placer
	// Carts places the carts that carry an Idempotency-Key: batched, and
	// lua, which takes a cart's stock in Redis first; both commit them in
	// batches.
	Carts CartPlacer
	// StoresKeys says that Placer keeps its buyers' Idempotency-Keys for
	// orders itself, in the step that decides them (lua, in Redis); its
	// answers are those of the service's own keys (keys.go).
	StoresKeys bool
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
	// with the database.
	Reconcile func(ctx context.Context, token int64) (Reconciliation, error)
	// Close, when set, stops and waits for the work the strategy runs in
	// the background by itself (batched's and lua's writers); the
	// service's Close calls it. NewService fills in one that does nothing.
	Close func()
}

// Guarded is the placement of a guard that the service wraps under rules,
// with no step of its own.
func Guarded(g stock.Guard, rules Rules) Placement { return Placement{Guard: g, Rules: rules} }

// Rules are what a placement applies beyond the stock.
type Rules struct {
	Limit  int           // units of a SKU per user; 0 for none
	Window time.Duration // the payment window; 0 for none
}

// Placer places an order of one SKU itself, rather than through a guard's
// Adjust, under rules.
type Placer interface {
	Place(ctx context.Context, r PlaceRequest, rules Rules) (o Order, replayed bool, err error)
}

// CartPlacer places a cart with an Idempotency-Key itself, under rules.
type CartPlacer interface {
	PlaceCart(ctx context.Context, r PlaceRequest, rules Rules) (Order, bool, error)
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
	s.strategy.Close()
	if s.keys != nil {
		s.keys.pipe.Close()
	}
}

// StoresKeys reports whether the service keeps its buyers'
// Idempotency-Keys for orders, by itself or through its strategy
// (Placement.StoresKeys), so that the caller's key store need not. Place
// then answers as that store would: a retry of the same request (user, SKU
// and quantity) gets its first answer again, replayed, a refusal such as
// sold out included; a key reused for another request is refused
// (idempotency.ErrKeyReused); a key whose first request is still being decided is told
// so (idempotency.ErrInProgress); a busy answer is not kept, so that the retry
// asks again.
func (s *Service) StoresKeys() bool {
	return s.strategy.StoresKeys || s.keys != nil
}
