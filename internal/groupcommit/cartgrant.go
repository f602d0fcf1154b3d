package groupcommit

import (
	"time"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// cartState is what a batch of carts reads under its stock rows' locks.
type cartState struct {
	skus     map[string]skuState // of every SKU that a cart of the batch has a line of
	deadline *time.Time          // of the orders it places, with a payment window
	// held is what the batch's users hold of each SKU, by SKU and user,
	// under a per-user limit.
	held map[string]map[string]int
}

// skuState is one SKU's row, as a batch of carts read it.
type skuState struct {
	found     bool  // the SKU is on sale
	available int   // before the batch took anything
	epoch     int64 // its sale's epoch, for carts of Mode.Held
}

// cartGrants is grantCarts' answer for a batch of carts.
type cartGrants struct {
	decisions []decision
	taken     map[string]int            // the units granted, by SKU
	holdings  map[string]map[string]int // by SKU, users whose holding grows: what they hold after
}

// grantCarts decides a batch of carts from what readCarts read, in
// arrival order: each cart gets every line or none. A line that is not on
// sale, short, or over the per-user limit refuses its cart alone, as the
// service refuses a cart placed on its own: sold out naming every short
// SKU, else over the limit at its first line that passes it. It touches
// no database.
//
// A cart whose units are held elsewhere (Mode.Held), each line's in its
// SKU's sale of an epoch, is refused, busy, when any line's epoch is not
// its SKU's any more, as grant refuses an order of one SKU. A cart whose
// buyer stopped waiting is refused, busy, as grant refuses such an order
// (left).
func grantCarts[M any](m Mode, batch []*Request[M], known map[order.UserKey]order.Order, st cartState, now time.Time) cartGrants {
	g := cartGrants{decisions: make([]decision, len(batch)), taken: map[string]int{}, holdings: map[string]map[string]int{}}
	first := map[order.UserKey]int{}
	for i, p := range batch {
		r, d := p.Order, &g.decisions[i]
		k := order.UserKey{User: r.UserID, Key: r.IdempotencyKey}
		if o, ok := known[k]; ok {
			d.verdict, d.o = replayed, o
			continue
		}
		if err := lostEpochs(m.Held, p, st); err != nil {
			d.verdict, d.err = refused, err
			continue
		}
		if err := left(m, p); err != nil {
			d.verdict, d.err = refused, err
			continue
		}
		if j, ok := first[k]; ok {
			d.verdict, d.first = repeated, j
			continue
		}
		first[k] = i
		if err := checkCart(&g, m.Rules.Limit, p, st); err != nil {
			d.verdict, d.err = refused, err
			continue
		}
		takeCart(&g, m.Rules.Limit, p, st)
		d.verdict, d.o = granted, cartOrder(r, st.deadline, now)
	}
	return g
}

// lostEpochs refuses a cart, when held, one of whose lines was held in a
// sale before its SKU's current one.
func lostEpochs[M any](held bool, p *Request[M], st cartState) error {
	if !held {
		return nil
	}
	for i, l := range p.Order.Items {
		if s := st.skus[l.SKU]; s.found && i < len(p.Epochs) && p.Epochs[i] != s.epoch {
			return lostEpoch(l.SKU, p.Epochs[i], s.epoch)
		}
	}
	return nil
}

// checkCart refuses p's cart if a line is not on sale, is short of what the
// batch has left, or passes the per-user limit (0 for none).
func checkCart[M any](g *cartGrants, limit int, p *Request[M], st cartState) error {
	var short []string
	for _, l := range p.Order.Items {
		s := st.skus[l.SKU]
		if !s.found {
			return order.NotFound(l.SKU)
		}
		if l.Quantity > s.available-g.taken[l.SKU] {
			short = append(short, l.SKU)
		}
	}
	if short != nil {
		return order.AsRefusal(&stock.ShortError{SKUs: short})
	}
	if limit > 0 {
		for _, l := range p.Order.Items {
			if held := g.held(st, l.SKU, p.Order.UserID); held+l.Quantity > limit {
				return order.LimitReached(p.Order.UserID, l.SKU, held, limit)
			}
		}
	}
	return nil
}

// takeCart grants p's cart its lines, and under a per-user limit adds
// them to what its user holds.
func takeCart[M any](g *cartGrants, limit int, p *Request[M], st cartState) {
	for _, l := range p.Order.Items {
		g.taken[l.SKU] += l.Quantity
		if limit > 0 {
			if g.holdings[l.SKU] == nil {
				g.holdings[l.SKU] = map[string]int{}
			}
			g.holdings[l.SKU][p.Order.UserID] = g.held(st, l.SKU, p.Order.UserID) + l.Quantity
		}
	}
}

// held is what user holds of sku, with what the batch granted so far.
func (g *cartGrants) held(st cartState, sku, user string) int {
	if units, ok := g.holdings[sku][user]; ok {
		return units
	}
	return st.held[sku][user]
}

// cartOrder is the order of a cart granted at now: its head row, with its
// lines.
func cartOrder(r order.PlaceRequest, deadline *time.Time, now time.Time) order.Order {
	key := r.IdempotencyKey
	o := order.Order{SKU: r.Items[0].SKU, UserID: r.UserID, Quantity: r.Items[0].Quantity, Status: order.StatusCreated,
		IdempotencyKey: &key, CreatedAt: now, LineCount: len(r.Items), Items: r.Items}
	if deadline != nil {
		o.Status, o.ExpiresAt = order.StatusPending, deadline
	}
	return o
}
