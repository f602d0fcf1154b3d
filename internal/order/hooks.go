package order

import (
	"context"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/stock"
)

// What a strategy can do beyond stock.Guard's Adjust: optional interfaces
// that the service checks where it uses them. A strategy that has one says
// so with a compile-time assertion beside its own code. See "Adding a
// strategy" in docs/strategies.md.

// placer is a strategy that places orders itself, rather than through
// Adjust: batched and lua, which batch them. It checks its refusals
// itself, and queues its buyers itself, so nothing may queue them in front
// of it (stock.Queued).
type placer interface {
	place(ctx context.Context, r PlaceRequest, rules rules) (Order, bool, error)
}

// PlacesOrders reports whether g places orders itself: then it must not
// stand behind stock.Queued, which would hide that and send its orders
// through Adjust.
func PlacesOrders(g stock.Guard) bool {
	_, ok := g.(placer)
	return ok
}

// cartPlacer is a strategy that places carts itself: lua, which takes a
// cart's stock in Redis first. place is the service's own placement, the
// database's part, on the guard given, which it calls once Redis has the
// cart's stock.
type cartPlacer interface {
	placeCart(ctx context.Context, r PlaceRequest, place func(context.Context, PlaceRequest, stock.Guard) (Order, bool, error)) (Order, bool, error)
}

// keyKeeper is a strategy that keeps its buyers' Idempotency-Keys itself,
// for orders, in the step that decides them: lua, in Redis, with each
// SKU's stock. Its place answers as the service's keys do (kept.go).
type keyKeeper interface {
	placer
	keepsKeys()
}

// KeepsKeys reports whether the service keeps its buyers'
// Idempotency-Keys for orders, by itself or through its strategy
// (keyKeeper), so that the caller's key store need not. Place then
// answers as that store would: a retry of the same request (user, SKU and
// quantity) gets its first answer again, replayed, a refusal such as sold
// out included; a key reused for another request is refused
// (ErrKeyReused); a key whose first request is still being decided is told
// so (stock.ErrInProgress); a busy answer is not kept, so that the retry
// asks again.
func (s *Service) KeepsKeys() bool {
	_, own := s.guard.(keyKeeper)
	return own || s.keys != nil
}

// refunder is a strategy that refunds an order itself, rather than through
// Adjust: lua, which also takes the units off what the user holds in Redis.
type refunder interface {
	refund(ctx context.Context, o Order, fn stock.Fn) error
}

// firstReader is a strategy that lets a purchase make its first read
// itself: the service then reads the buyer's key with the stock.
type firstReader interface {
	AdjustAfter(ctx context.Context, sku string, delta int, first stock.FirstRead, fn stock.Fn) error
}

var _ firstReader = (*stock.Queued)(nil)

// restocker is a strategy that changes a SKU's stock itself, rather than
// through Adjust: lua, whose Redis stock must follow the change that set,
// run in the database's transaction, reports.
type restocker interface {
	restock(ctx context.Context, sku string, set func(tx *gorm.DB) (delta int, err error)) error
}

// saleKeeper is a strategy that keeps a SKU's sale outside the database:
// lua, in Redis.
type saleKeeper interface {
	// newSale, in the transaction that sets sku up, starts a new sale:
	// nothing kept of an earlier one sells again.
	newSale(tx *gorm.DB, sku string) error
	// forget drops what is kept of sku, once that transaction, or the one
	// that deleted it, has committed.
	forget(ctx context.Context, sku string) error
}

// Reconciler is a strategy whose stock outside the database must be set
// from the database now and then, by a job that runs on one instance at a
// time: lua, in Redis. token is the run's fencing token.
type Reconciler interface {
	Reconcile(ctx context.Context, token int64) (Report, error)
}
