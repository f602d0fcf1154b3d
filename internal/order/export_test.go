package order

import (
	"context"

	"github.com/stockguard/shop/internal/stock"
)

// BetweenLines has the lua strategy r run f before each line of a saga.
func BetweenLines(r Reconciler, f func(line int)) { r.(*Lua).betweenLines = f }

// Home is the bucket of sku that user tries first under the lua strategy r.
func Home(r Reconciler, sku, user string) string { return r.(*Lua).route(sku, user)[0] }

// PlaceCartThen places r, a cart, as Place does under the lua strategy
// lua, and runs then once the database has the cart, before its saga ends
// the lines' reservations in Redis.
func PlaceCartThen(ctx context.Context, s *Service, lua Reconciler, r PlaceRequest, then func()) (Order, error) {
	o, _, err := lua.(*Lua).PlaceCart(ctx, r, func(ctx context.Context, r PlaceRequest, g stock.Guard) (Order, bool, error) {
		o, replayed, err := s.placeWith(ctx, r, g)
		then()
		return o, replayed, err
	})
	return o, err
}
