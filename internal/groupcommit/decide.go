package order

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/tracing"
)

// One batch's transaction, in three steps: readBatch locks the SKU's stock
// row and reads what the batch needs, grant decides who gets what without
// touching the database, and writeBatch writes the decision. The row is
// locked from the first statement to the commit, so the transaction does
// as little as it can in between.

// batchState is what a batch's transaction reads under the stock row's
// lock.
type batchState struct {
	found     bool           // the SKU is on sale
	available int            // before the batch took anything
	epoch     int64          // the SKU's sale epoch, for lua's reservations
	deadline  *time.Time     // of the orders it places, with a payment window
	held      map[string]int // what the batch's users hold of the SKU, under a per-user limit
	// took is what the first statement took already: every unit asked,
	// when they all fit and no per-user limit applies.
	took int
}

// verdict is what grant decides for one buyer.
type verdict int

const (
	granted  verdict = iota // a new order
	replayed                // the buyer's key has an order already
	repeated                // an earlier buyer of the batch has the same key
	refused                 // sold out, over the limit, or a lost epoch
)

// decision is grant's answer for one buyer.
type decision struct {
	verdict verdict
	order   Order // granted: the order to insert; replayed: the key's order
	first   int   // repeated: the batch index of the buyer who asked first
	err     error // refused: why
}

// grants is grant's answer for a batch.
type grants struct {
	decisions []decision
	taken     int            // the units granted
	holdings  map[string]int // users whose holding grows: what they hold after
}

// decide is one batch's transaction. It returns each buyer's answer and the
// stock it leaves, or -1 if the SKU is not on sale. known holds the orders
// that the batch's keys have already, when they were looked up.
func decide(tx *gorm.DB, sku string, batch []*pending, known map[UserKey]Order, ids IDSource) ([]Answer, int, error) {
	now := Now()
	st, err := readBatch(tx, sku, batch, known)
	if err != nil {
		return nil, 0, err // a failed statement may have ended the transaction
	}
	answers := make([]Answer, len(batch))
	if !st.found {
		for i := range answers {
			answers[i].Err = NotFound(sku)
		}
		return answers, -1, nil
	}
	g := grant(sku, batch, known, st, now)
	if err := writeBatch(tx, sku, st, &g, ids, batch); err != nil {
		return nil, 0, err
	}
	for i, d := range g.decisions {
		switch d.verdict {
		case granted:
			answers[i] = Answer{Order: d.order}
		case replayed:
			answers[i] = Replay(d.order, batch[i].r)
		case refused:
			answers[i] = Answer{Err: d.err}
		}
	}
	for i, d := range g.decisions {
		if d.verdict == repeated {
			answers[i] = SameKey(answers[d.first], batch[i].r)
		}
	}
	return answers, st.available - g.taken, nil
}

// readBatch locks sku's stock row and reads what the batch needs. When
// every buyer's units fit and no per-user limit applies, its first
// statement takes them all, which locks the row and saves a statement;
// writeBatch gives back what grant then refuses.
func readBatch(tx *gorm.DB, sku string, batch []*pending, known map[UserKey]Order) (batchState, error) {
	var st batchState
	limit := batch[0].rules.Limit
	if asked := askedUnits(batch, known); asked > 0 && limit == 0 {
		took, err := stock.Take(tx, sku, asked)
		if err != nil {
			return st, err
		}
		if took {
			st.took = asked
		}
	}
	if st.took == 0 {
		// Lock the row, then read it below: the read sees every commit
		// before the lock, and no batch or refund can change it until this
		// one commits.
		if found, err := stock.Lock(tx, sku); err != nil || !found {
			return st, err
		}
	}
	st.found = true
	var err error
	if st.available, st.epoch, err = stock.ReadEpoch(tx, sku); err != nil {
		return st, err
	}
	st.available += st.took
	if w := batch[0].rules.Window; w > 0 {
		now, err := db.Now(tx)
		if err != nil {
			return st, err
		}
		deadline := now.Add(w)
		st.deadline = &deadline
	}
	if limit > 0 {
		users := make([]string, len(batch))
		for i, p := range batch {
			users[i] = p.r.UserID
		}
		if st.held, err = Held(tx, sku, users); err != nil {
			return st, err
		}
	}
	return st, nil
}

// askedUnits is what the batch asks for: the units of each key that has
// no order yet, once.
func askedUnits(batch []*pending, known map[UserKey]Order) int {
	asked, seen := 0, map[UserKey]bool{}
	for _, p := range batch {
		k := UserKey{p.r.UserID, p.r.IdempotencyKey}
		if _, ok := known[k]; !ok && !seen[k] {
			seen[k] = true
			asked += p.r.Quantity
		}
	}
	return asked
}

// grant decides a batch from what readBatch read: buyers in arrival order,
// as far as the stock and the per-user limit go. It touches no database.
//
// lua's reservations were taken from a Redis state; one of an epoch before
// the SKU's current one was lost with its state (Redis restarted empty),
// and the state built since does not count it. Persisting it would sell a
// unit that Redis sells again, and its buyer, answered busy, may since
// have been told sold out: it is refused, busy, and its buyer's retry
// reserves in the current state.
func grant(sku string, batch []*pending, known map[UserKey]Order, st batchState, now time.Time) grants {
	g := grants{decisions: make([]decision, len(batch)), holdings: map[string]int{}}
	first := map[UserKey]int{}
	fenced := batch[0].entry != ""
	for i, p := range batch {
		r, k, d := p.r, UserKey{p.r.UserID, p.r.IdempotencyKey}, &g.decisions[i]
		if o, ok := known[k]; ok {
			d.verdict, d.order = replayed, o
			continue
		}
		if fenced && p.epoch != st.epoch {
			d.verdict, d.err = refused, fmt.Errorf("order: place: %w: the reservation's Redis state, of epoch %d, was lost; the SKU is in epoch %d", stock.ErrBusy, p.epoch, st.epoch)
			continue
		}
		if j, ok := first[k]; ok {
			d.verdict, d.first = repeated, j
			continue
		}
		first[k] = i
		held, grew := g.holdings[r.UserID]
		if !grew {
			held = st.held[r.UserID]
		}
		switch {
		case p.rules.Limit > 0 && held+r.Quantity > p.rules.Limit:
			d.verdict, d.err = refused, LimitReached(r.UserID, sku, held, p.rules.Limit)
		case r.Quantity > st.available-g.taken:
			d.verdict, d.err = refused, SoldOut(sku)
		default:
			g.taken += r.Quantity
			if p.rules.Limit > 0 {
				g.holdings[r.UserID] = held + r.Quantity
			}
			key := r.IdempotencyKey
			d.verdict, d.order = granted, Order{SKU: sku, UserID: r.UserID, Quantity: r.Quantity, Status: StatusCreated, IdempotencyKey: &key, CreatedAt: now}
			if st.deadline != nil {
				d.order.Status, d.order.ExpiresAt = StatusPending, st.deadline
			}
		}
	}
	return g
}

// writeBatch writes what grant decided: the units taken, the orders, with
// their ids set in g, and the holdings. The orders' events keep their
// requests' traceparents.
func writeBatch(tx *gorm.DB, sku string, st batchState, g *grants, ids IDSource, batch []*pending) error {
	switch {
	case st.took > g.taken: // refused reservations of a lost epoch
		if err := stock.Give(tx, sku, st.took-g.taken); err != nil {
			return err
		}
	case st.took == 0 && g.taken > 0:
		took, err := stock.Take(tx, sku, g.taken)
		if err != nil {
			return err
		}
		if !took {
			return fmt.Errorf("order: batch of %s: the stock changed under the row lock", sku)
		}
	}
	var orders []Order
	var parents []string // nil when untraced
	for i, d := range g.decisions {
		if d.verdict == granted {
			orders = append(orders, d.order)
			if tracing.Enabled() {
				parents = append(parents, tracing.Traceparent(batch[i].ctx))
			}
		}
	}
	if len(orders) == 0 {
		return nil
	}
	if err := InsertOrders(tx, orders, ids); err != nil {
		return err
	}
	if err := SetHeld(tx, sku, g.holdings); err != nil {
		return err
	}
	n := 0
	for i := range g.decisions {
		if g.decisions[i].verdict == granted {
			g.decisions[i].order = orders[n]
			n++
		}
	}
	return RecordTraced(tx, EventPlaced, orders, parents)
}

// lookup reads the orders that the batch's keys already have, outside the
// batch's transaction, so that its row lock is not held for the read. A key
// that gets an order after the read fails the INSERT on the unique index,
// and the batch runs again.
func lookup(ctx context.Context, gdb *gorm.DB, batch []*pending) (map[UserKey]Order, error) {
	users := make([]string, len(batch))
	for i, p := range batch {
		users[i] = p.r.UserID
	}
	return Known(ctx, gdb, users)
}
