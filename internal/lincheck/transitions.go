package lincheck

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/stockguard/shop/internal/history"
)

// move is what a refund, cancellation or payment answered ok does to its
// order: from one of from, to to, giving its units back or not.
type move struct {
	kind kind
	from []status
	to   status
}

var moves = map[history.Kind]move{
	history.Refund: {giveBack, []status{created, paid}, refunded},
	history.Cancel: {giveBack, []status{pending, lapsed}, cancelled},
	history.Pay:    {pay, []status{pending}, paid},
}

// refusals are the answers of a refund, cancellation or payment that
// decide its key without changing the order, by the statuses in which
// each is true.
var refusals = map[history.Kind]map[history.Answer][]status{
	history.Refund: {"already-refunded": {refunded}, "order-expired": {cancelled}},
	history.Cancel: {"already-refunded": {refunded}, "order-expired": {cancelled}, "already-paid": {paid, created}},
	history.Pay:    {"already-refunded": {refunded}, "order-expired": {cancelled, lapsed}, "already-paid": {paid, refunded, created}},
}

// transitions makes each key of kind one step, as placements does for
// orders.
func (p *prepared) transitions(kind history.Kind) {
	m := moves[kind]
	final := func(op history.Op) bool {
		_, refused := refusals[kind][op.Answer]
		return op.Answer == history.OK || refused
	}
	for _, g := range p.groups(kind) {
		d := p.decide(g.ops, final, func(a, b history.Op) bool { return a.Answer == b.Answer })
		for _, c := range d.contradictions {
			p.violate(c, p.src[c].Return, "%s was told %s, and %s", p.who(c), p.told(d.first), p.told(c))
		}
		op := p.src[g.ops[0]]
		o, known := p.orderIdx[op.Order]
		if !known {
			continue // an order this history never placed: the answer was a 404
		}
		st := &step{op: g.ops[0], order: o, lines: p.lines(p.linesOf[op.Order])}
		switch {
		case d.first < 0 && p.final != nil:
			continue // the final state tells whether it took effect: shopSteps
		case d.first < 0:
			st.kind, st.from, st.to, st.maybe = m.kind, m.from, m.to, true
		case p.src[d.first].Answer == history.OK:
			st.kind, st.from, st.to = m.kind, m.from, m.to
		default:
			st.kind, st.from = mustBe, refusals[kind][p.src[d.first].Answer]
		}
		if d.first >= 0 {
			st.op = d.first
		}
		st.who, st.what = p.describeStep(st.op, string(p.src[st.op].Answer), op.Order)
		p.add(st, d.call, d.ret)
	}
}

// shopSteps makes a step of each change to an order that the final state
// shows and no answer told: a refund, a cancellation or a payment whose
// answer was lost, or an expiry, which the shop does by itself after the
// order's deadline. Each took effect at one point between the first call
// that could have made it (the shop's own stamp, for an expiry) and the
// final state.
func (p *prepared) shopSteps() {
	if p.final == nil {
		return
	}
	told := make(map[history.Kind]map[int64]bool)
	firstCall := make(map[history.Kind]map[int64]int64)
	for kind := range moves {
		told[kind], firstCall[kind] = make(map[int64]bool), make(map[int64]int64)
	}
	for _, op := range p.src {
		if _, ok := moves[op.Kind]; !ok {
			continue
		}
		switch {
		case op.Answer == history.OK:
			told[op.Kind][op.Order] = true
		case op.Answer.Unknown():
			if c, ok := firstCall[op.Kind][op.Order]; !ok || op.Call < c {
				firstCall[op.Kind][op.Order] = op.Call
			}
		}
	}
	for _, o := range p.final.Final.Orders {
		wasPaid := o.Status == "paid" || o.Status == "refunded" && o.Window
		for _, c := range []struct {
			kind history.Kind
			did  bool
			by   int64 // the shop's own stamp, if it did it by itself
		}{{history.Pay, wasPaid, 0}, {history.Cancel, o.Status == "cancelled", o.Expired}, {history.Refund, o.Status == "refunded", 0}} {
			if !c.did || told[c.kind][o.ID] {
				continue
			}
			call, asked := firstCall[c.kind][o.ID]
			if c.by != 0 && (!asked || c.by < call) {
				call, asked = c.by, true
			}
			if !asked {
				p.violate(len(p.src)-1, p.final.Return, "order %d is %s in the database, but no %s of it was answered ok or left unanswered", o.ID, o.Status, c.kind)
				continue
			}
			m := moves[c.kind]
			what := fmt.Sprintf("order %d: %s, unanswered", o.ID, c.kind)
			if c.by != 0 && call == c.by {
				what = fmt.Sprintf("order %d: expired by the shop", o.ID)
			}
			st := &step{op: len(p.src) - 1, who: "the shop", what: what, kind: m.kind, from: m.from, to: m.to, order: p.order(o.ID), lines: p.lines(o.Items)}
			p.add(st, call, p.end-1)
		}
	}
}

// deadlines makes each order's payment deadline a step, within the final
// state's clock error of the database's stamp: from then on a pending
// order can no longer be paid (order-expired), though it holds its units
// until the shop or its buyer cancels it.
func (p *prepared) deadlines() {
	if p.final == nil {
		return
	}
	slack := p.final.Final.ClockError
	for _, o := range p.final.Final.Orders {
		if o.Deadline == 0 || len(o.Items) == 0 || o.Deadline-slack >= p.end-1 {
			continue // no deadline, or one still to come at the final state
		}
		st := &step{op: p.finalOp, who: "the clock", what: fmt.Sprintf("order %d: its payment deadline", o.ID), kind: lapse,
			order: p.order(o.ID), lines: p.lines(o.Items)}
		p.add(st, o.Deadline-slack, min(o.Deadline+slack, p.end-1))
	}
}

// adjustments makes each adjustment key one step.
func (p *prepared) adjustments() {
	final := func(op history.Op) bool { return op.Answer == history.OK || op.Answer == "insufficient-stock" }
	for _, g := range p.groups(history.StockAdjust) {
		d := p.decide(g.ops, final, func(a, b history.Op) bool { return a.Answer == b.Answer })
		for _, c := range d.contradictions {
			p.violate(c, p.src[c].Return, "%s was told %s, and %s", p.who(c), p.told(d.first), p.told(c))
		}
		op := g.ops[0]
		st := &step{op: op, kind: adjust, lines: p.lines(p.src[op].Items), order: -1, maybe: d.first < 0}
		if d.first >= 0 && p.src[d.first].Answer != history.OK {
			st.kind = noRoom
		}
		st.who, st.what = p.describeStep(op, string(p.src[op].Answer), 0)
		p.add(st, d.call, d.ret)
	}
}

// stock makes a step of each stock set and read, and of each order read.
func (p *prepared) stock() {
	for i, op := range p.src {
		st := &step{op: i, order: -1}
		ret := op.Return
		switch {
		case op.Kind == history.StockSet && (op.Answer == history.OK || op.Answer.Unknown()):
			st.kind, st.lines, st.maybe = set, p.lines(op.Items), op.Answer.Unknown()
			if st.maybe {
				ret = p.end - 1
			}
		case op.Kind == history.StockRead && op.Answer == history.OK && op.Value != nil:
			st.kind, st.lines, st.value = readStock, p.lines(op.Items), *op.Value
		case op.Kind == history.OrderRead && op.Answer == history.OK:
			s, ok := statusesOf(op.Status)
			o, known := p.orderIdx[op.Order]
			if !ok || !known {
				p.violate(i, op.Return, "%s read order %d as %q, an order or a status this history does not have", p.who(i), op.Order, op.Status)
				continue
			}
			st.kind, st.from, st.order, st.lines = mustBe, s, o, p.lines(p.linesOf[op.Order])
		default:
			continue
		}
		st.who, st.what = p.describeStep(i, string(op.Answer), op.Order)
		p.add(st, op.Call, ret)
	}
}

// finalSteps makes the final state one step per partition: each SKU's
// available stock, and each order's status.
func (p *prepared) finalSteps() {
	if p.final == nil {
		return
	}
	parts := make(map[int]*step)
	var roots []int
	of := func(sku int) *step {
		r := p.root(sku)
		if parts[r] == nil {
			parts[r] = &step{op: p.finalOp, who: "the database", what: "the final state", kind: final, order: -1, lines: []line{{sku: sku}}}
			roots = append(roots, r)
		}
		return parts[r]
	}
	for _, s := range p.final.Final.Stock {
		st := of(p.sku(s.SKU))
		st.stock = append(st.stock, line{sku: p.sku(s.SKU), qty: s.Available})
	}
	for _, o := range p.final.Final.Orders {
		s, ok := statusesOf(o.Status)
		if !ok || len(o.Items) == 0 {
			continue
		}
		st := of(p.sku(o.Items[0].SKU))
		st.sts = append(st.sts, struct {
			order int
			st    []status
		}{p.order(o.ID), s})
	}
	for _, r := range roots {
		p.steps = append(p.steps, porcupine.Operation{ClientId: p.final.Client, Input: parts[r], Call: p.final.Call - p.base, Return: p.final.Return - p.base})
	}
}
