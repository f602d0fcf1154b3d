package groupcommit

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/order"
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
	epoch     int64          // the SKU's sale epoch, for requests of Mode.Held
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
	o       order.Order // granted: the order to insert; replayed: the key's order
	first   int         // repeated: the batch index of the buyer who asked first
	err     error       // refused: why
}

// grants is grant's answer for a batch.
type grants struct {
	decisions []decision
	taken     int            // the units granted
	holdings  map[string]int // users whose holding grows: what they hold after
}

// decide is one batch's transaction, in mode m. It returns each buyer's
// answer and the stock it leaves, or -1 if the SKU is not on sale. known
// holds the orders that the batch's keys have already, when they were
// looked up.
func decide[M any](tx *gorm.DB, m Mode, sku string, batch []*Request[M], known map[order.UserKey]order.Order, ids order.IDSource) ([]order.Answer, int, error) {
	now := order.Now()
	st, err := readBatch(tx, m.Rules, sku, batch, known)
	if err != nil {
		return nil, 0, err // a failed statement may have ended the transaction
	}
	if !st.found {
		answers := make([]order.Answer, len(batch))
		for i := range answers {
			answers[i].Err = order.NotFound(sku)
		}
		return answers, -1, nil
	}
	g := grant(m, sku, batch, known, st, now)
	if err := writeBatch(tx, sku, st, &g, ids, batch); err != nil {
		return nil, 0, err
	}
	return answersOf(g.decisions, batch), st.available - g.taken, nil
}

// answersOf is each buyer's answer from the batch's decisions, once the
// granted orders have their ids.
func answersOf[M any](decisions []decision, batch []*Request[M]) []order.Answer {
	answers := make([]order.Answer, len(batch))
	for i, d := range decisions {
		switch d.verdict {
		case granted:
			answers[i] = order.Answer{Order: d.o}
		case replayed:
			answers[i] = order.Replay(d.o, batch[i].Order)
		case refused:
			answers[i] = order.Answer{Err: d.err}
		}
	}
	for i, d := range decisions {
		if d.verdict == repeated {
			answers[i] = order.SameKey(answers[d.first], batch[i].Order)
		}
	}
	return answers
}

// readBatch locks sku's stock row and reads what the batch needs. When
// every buyer's units fit and no per-user limit applies, its first
// statement takes them all, which locks the row and saves a statement;
// writeBatch gives back what grant then refuses.
func readBatch[M any](tx *gorm.DB, rules order.Rules, sku string, batch []*Request[M], known map[order.UserKey]order.Order) (batchState, error) {
	var st batchState
	limit := rules.Limit
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
	if w := rules.Window; w > 0 {
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
			users[i] = p.Order.UserID
		}
		if st.held, err = order.Held(tx, sku, users); err != nil {
			return st, err
		}
	}
	return st, nil
}

// askedUnits is what the batch asks for: the units of each key that has
// no order yet, once.
func askedUnits[M any](batch []*Request[M], known map[order.UserKey]order.Order) int {
	asked, seen := 0, map[order.UserKey]bool{}
	for _, p := range batch {
		k := order.UserKey{User: p.Order.UserID, Key: p.Order.IdempotencyKey}
		if _, ok := known[k]; !ok && !seen[k] {
			seen[k] = true
			asked += p.Order.Quantity
		}
	}
	return asked
}

// grant decides a batch from what readBatch read: buyers in arrival order,
// as far as the stock and the per-user limit go, but none who stopped
// waiting (left). It touches no database.
//
// A request whose units are held elsewhere (Mode.Held) was granted them
// in the SKU's sale of its epoch. One of an epoch before the SKU's
// current one lost them with that sale's state (the holder lost its
// state, and built it again), and the state built since does not count
// it. Persisting it
// would sell a unit that is sold again, and its buyer, answered busy, may
// since have been told sold out: it is refused, busy, and its buyer's
// retry asks the current state.
func grant[M any](m Mode, sku string, batch []*Request[M], known map[order.UserKey]order.Order, st batchState, now time.Time) grants {
	g := grants{decisions: make([]decision, len(batch)), holdings: map[string]int{}}
	first := map[order.UserKey]int{}
	limit := m.Rules.Limit
	for i, p := range batch {
		r, k, d := p.Order, order.UserKey{User: p.Order.UserID, Key: p.Order.IdempotencyKey}, &g.decisions[i]
		if o, ok := known[k]; ok {
			d.verdict, d.o = replayed, o
			continue
		}
		if m.Held && p.Epoch != st.epoch {
			d.verdict, d.err = refused, lostEpoch(sku, p.Epoch, st.epoch)
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
		held, grew := g.holdings[r.UserID]
		if !grew {
			held = st.held[r.UserID]
		}
		switch {
		case limit > 0 && held+r.Quantity > limit:
			d.verdict, d.err = refused, order.LimitReached(r.UserID, sku, held, limit)
		case r.Quantity > st.available-g.taken:
			d.verdict, d.err = refused, order.SoldOut(sku)
		default:
			g.taken += r.Quantity
			if limit > 0 {
				g.holdings[r.UserID] = held + r.Quantity
			}
			key := r.IdempotencyKey
			d.verdict, d.o = granted, order.Order{SKU: sku, UserID: r.UserID, Quantity: r.Quantity, Status: order.StatusCreated, IdempotencyKey: &key, CreatedAt: now}
			if st.deadline != nil {
				d.o.Status, d.o.ExpiresAt = order.StatusPending, st.deadline
			}
		}
	}
	return g
}

// left refuses, busy, a request whose buyer stopped waiting before its
// batch decided it, unless its units are held elsewhere (Mode.Held): the
// buyer has been answered busy, and may since have asked again, here or
// on another instance, and been told sold out, which an order made now
// would contradict. A request decided while its buyer waits is in a batch
// that holds the stock row until it commits, so a retry's refusal waits
// for that commit, or reads the stock from before it, which had the
// request's units.
func left[M any](m Mode, p *Request[M]) error {
	if m.Held || p.Ctx.Err() == nil {
		return nil
	}
	return stopped(p.Ctx)
}

// lostEpoch refuses, busy, an order whose units of sku were held in the
// sale of epoch held, now that the SKU is in epoch now.
func lostEpoch(sku string, held, now int64) error {
	return fmt.Errorf("order: place: %w: the units of %s held for the order, in the sale of epoch %d, were lost; the SKU is in epoch %d", stock.ErrBusy, sku, held, now)
}

// writeBatch writes what grant decided: the units taken, the orders, with
// their ids set in g, and the holdings. The orders' events keep their
// requests' traceparents.
func writeBatch[M any](tx *gorm.DB, sku string, st batchState, g *grants, ids order.IDSource, batch []*Request[M]) error {
	switch {
	case st.took > g.taken: // refused: reservations of a lost epoch, or buyers who left
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
	orders, parents := grantedOrders(g.decisions, batch)
	if len(orders) == 0 {
		return nil
	}
	if err := order.InsertOrders(tx, orders, ids); err != nil {
		return err
	}
	if err := order.SetHeld(tx, sku, g.holdings); err != nil {
		return err
	}
	setGranted(g.decisions, orders)
	return order.RecordTraced(tx, order.EventPlaced, orders, parents)
}

// grantedOrders returns the orders granted in ds, in the batch's order,
// with their requests' traceparents (nil when untraced).
func grantedOrders[M any](ds []decision, batch []*Request[M]) (orders []order.Order, parents []string) {
	for i, d := range ds {
		if d.verdict == granted {
			orders = append(orders, d.o)
			if tracing.Enabled() {
				parents = append(parents, tracing.Traceparent(batch[i].Ctx))
			}
		}
	}
	return orders, parents
}

// setGranted sets the granted decisions' orders to orders, inserted, in
// the same order.
func setGranted(ds []decision, orders []order.Order) {
	n := 0
	for i := range ds {
		if ds[i].verdict == granted {
			ds[i].o = orders[n]
			n++
		}
	}
}

// lookup reads the orders that the batch's keys already have, outside the
// batch's transaction, so that its row lock is not held for the read. A key
// that gets an order after the read fails the INSERT on the unique index,
// and the batch runs again.
func lookup[M any](ctx context.Context, gdb *gorm.DB, batch []*Request[M]) (map[order.UserKey]order.Order, error) {
	users := make([]string, len(batch))
	for i, p := range batch {
		users[i] = p.Order.UserID
	}
	return order.Known(ctx, gdb, users)
}
