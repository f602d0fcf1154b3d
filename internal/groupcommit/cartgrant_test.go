package groupcommit

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// TestGrantCarts decides batches of carts from a state read beforehand,
// with no database: each cart gets all its lines or none, in arrival
// order; a short line refuses its cart alone, sold out naming every short
// SKU; the per-user limit holds per SKU; replays, repeated keys, carts
// held in a lost epoch, and buyers who left.
func TestGrantCarts(t *testing.T) {
	t.Parallel()
	cart := func(user, key string, lines ...order.Line) *Request[struct{}] {
		return &Request[struct{}]{Ctx: context.Background(), Order: order.PlaceRequest{UserID: user, Items: lines, IdempotencyKey: key}}
	}
	limit := func(n int) Mode { return Mode{Rules: order.Rules{Limit: n}} }
	a1, a2, b1, b2, c1 := order.Line{SKU: "a", Quantity: 1}, order.Line{SKU: "a", Quantity: 2}, order.Line{SKU: "b", Quantity: 1}, order.Line{SKU: "b", Quantity: 2}, order.Line{SKU: "c", Quantity: 1}
	on := func(a, b, c int) map[string]skuState {
		return map[string]skuState{"a": {found: true, available: a, epoch: 1}, "b": {found: true, available: b, epoch: 1}, "c": {found: true, available: c, epoch: 1}}
	}
	held := func(user string, epochs []int64, lines ...order.Line) *Request[struct{}] {
		p := cart(user, user, lines...)
		p.Epochs = epochs
		return p
	}
	known := order.Order{ID: 7, SKU: "a", UserID: "kim", Quantity: 1, LineCount: 2, Items: []order.Line{a1, b1}}
	tests := []struct {
		name  string
		mode  Mode
		batch []*Request[struct{}]
		st    cartState
		want  []verdict
		short [][]string // of the sold-out refusals, in order
		errs  []error    // of the refused, in order
		taken map[string]int
	}{
		{"a short line refuses its cart alone", Mode{}, []*Request[struct{}]{cart("ann", "1", a1, b1), cart("bob", "1", a2, b2), cart("cy", "1", a1, c1)},
			cartState{skus: on(2, 2, 1)}, []verdict{granted, refused, granted}, [][]string{{"a", "b"}}, []error{stock.ErrSoldOut}, map[string]int{"a": 2, "b": 1, "c": 1}},
		{"none taken from a refused cart", Mode{}, []*Request[struct{}]{cart("ann", "1", a1, c1), cart("bob", "1", b1, c1), cart("cy", "1", b1, c1)},
			cartState{skus: on(1, 1, 1)}, []verdict{granted, refused, refused}, [][]string{{"c"}, {"c"}}, []error{stock.ErrSoldOut, stock.ErrSoldOut}, map[string]int{"a": 1, "c": 1}},
		{"replay and repeat", Mode{}, []*Request[struct{}]{cart("kim", "k", a1, b1), cart("ann", "x", a1, c1), cart("ann", "x", a1, c1)},
			cartState{skus: on(5, 5, 5)}, []verdict{replayed, granted, repeated}, nil, nil, map[string]int{"a": 1, "c": 1}},
		{"per-user limit, per SKU", limit(2), []*Request[struct{}]{cart("ann", "1", a1, b1), cart("ann", "2", a1, b1), cart("ann", "3", c1, b1)},
			cartState{skus: on(9, 9, 9), held: map[string]map[string]int{"b": {"ann": 1}}}, []verdict{granted, refused, refused}, nil, []error{order.ErrLimitReached, order.ErrLimitReached}, map[string]int{"a": 1, "b": 1}},
		{"not on sale", Mode{}, []*Request[struct{}]{cart("ann", "1", a1, order.Line{SKU: "gone", Quantity: 1}), cart("bob", "1", a1, b1)},
			cartState{skus: map[string]skuState{"a": {found: true, available: 1}, "b": {found: true, available: 1}, "gone": {}}}, []verdict{refused, granted}, nil, []error{stock.ErrNotFound}, map[string]int{"a": 1, "b": 1}},
		{"lost epoch", Mode{Held: true}, []*Request[struct{}]{held("a", []int64{1, 1}, a1, b1), held("b", []int64{1, 0}, a1, b1), held("c", []int64{1, 1}, b1, c1)},
			cartState{skus: on(9, 9, 9)}, []verdict{granted, refused, granted}, nil, []error{stock.ErrBusy}, map[string]int{"a": 1, "b": 2, "c": 1}},
		{"a buyer who left takes nothing", Mode{}, []*Request[struct{}]{abandoned(cart("ann", "1", a1, b1)), cart("bob", "1", a1, b1)},
			cartState{skus: on(1, 1, 1)}, []verdict{refused, granted}, nil, []error{stock.ErrBusy}, map[string]int{"a": 1, "b": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := grantCarts(tt.mode, tt.batch, map[order.UserKey]order.Order{{User: "kim", Key: "k"}: known}, tt.st, time.Now())
			var errs []error
			var short [][]string
			for i, d := range g.decisions {
				if d.verdict != tt.want[i] {
					t.Errorf("cart %d: verdict %d, want %d (%v)", i, d.verdict, tt.want[i], d.err)
				}
				if d.verdict == refused {
					errs = append(errs, d.err)
					var s interface{ Short() []string }
					if errors.As(d.err, &s) && s.Short() != nil {
						short = append(short, s.Short())
					}
				}
				if d.verdict == granted && !slices.Equal(d.o.Items, tt.batch[i].Order.Items) {
					t.Errorf("cart %d: granted %v, want its lines %v", i, d.o.Items, tt.batch[i].Order.Items)
				}
			}
			if len(errs) != len(tt.errs) {
				t.Fatalf("refused %v, want %v", errs, tt.errs)
			}
			for i, err := range errs {
				if !errors.Is(err, tt.errs[i]) {
					t.Errorf("refusal %d: %v, want %v", i, err, tt.errs[i])
				}
			}
			if !slices.EqualFunc(short, tt.short, slices.Equal) {
				t.Errorf("short %v, want %v", short, tt.short)
			}
			for _, sku := range []string{"a", "b", "c"} {
				if g.taken[sku] != tt.taken[sku] {
					t.Errorf("taken of %s: %d, want %d", sku, g.taken[sku], tt.taken[sku])
				}
			}
		})
	}
	g := grantCarts(limit(3), []*Request[struct{}]{cart("ann", "1", a1, b1), cart("ann", "2", a1, c1)}, nil, cartState{skus: on(9, 9, 9), held: map[string]map[string]int{"a": {"ann": 1}}}, time.Now())
	if g.holdings["a"]["ann"] != 3 || g.holdings["b"]["ann"] != 1 || g.holdings["c"]["ann"] != 1 {
		t.Errorf("ann holds %v after two carts, want 3 of a, 1 of b and of c", g.holdings)
	}
}
