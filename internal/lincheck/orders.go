package lincheck

import (
	"github.com/stockguard/shop/internal/history"
)

// placements makes each order key one step: the order placed, or a
// sold-out, between the key's first call and its first final answer. It
// checks first that the key's answers agree with each other and with the
// final state.
func (p *prepared) placements() {
	asked := make(map[string]bool)
	for _, g := range p.groups(history.Order) {
		asked[g.key] = true
		d := p.decide(g.ops, decisive, sameOrder)
		first := g.ops[0]
		for _, c := range d.contradictions {
			p.violate(c, p.src[c].Return, "%s was told %s, and %s", p.who(c), p.told(d.first), p.told(c))
		}
		db := p.byKey[g.key]
		if len(db) > 1 {
			p.violate(first, p.end, "two orders for one key: %s has orders %d and %d in the database", p.who(first), db[0].ID, db[1].ID)
		}
		if p.final != nil {
			p.placeFinal(d, first, db)
			continue
		}
		switch {
		case d.first >= 0 && p.src[d.first].Answer == history.Ordered:
			p.place(first, p.src[d.first].Order, p.src[d.first].Items, d.call, d.ret, false)
		case d.first >= 0 && p.src[d.first].Answer == history.SoldOut:
			p.refuse(d)
		case d.first < 0:
			p.place(first, 0, p.src[first].Items, d.call, p.end-1, true)
		}
	}
	if p.final == nil {
		return
	}
	for _, o := range p.final.Final.Orders {
		if !asked[keyOf(o.User, o.Key)] {
			p.violate(len(p.src)-1, p.final.Return, "order %d of %s under key %s is in the database, but no client of this history asked for it", o.ID, o.User, o.Key)
			p.place(len(p.src)-1, o.ID, o.Items, p.src[0].Call, p.end-1, false)
		}
	}
}

// placeFinal makes a key's step when the final state says whether it has
// an order.
func (p *prepared) placeFinal(d decision, first int, db []history.FinalOrder) {
	var told history.Op
	if d.first >= 0 {
		told = p.src[d.first]
	}
	switch {
	case d.first >= 0 && told.Answer == history.Ordered && len(db) == 0:
		p.violate(d.first, told.Return, "%s was told order %d, which the database does not have", p.who(d.first), told.Order)
	case d.first >= 0 && told.Answer == history.Ordered && db[0].ID != told.Order:
		p.violate(d.first, told.Return, "%s was told order %d, but the database has order %d under its key", p.who(d.first), told.Order, db[0].ID)
	case d.first >= 0 && told.Answer != history.Ordered && len(db) > 0:
		p.violate(d.first, told.Return, "%s was told %s %s, but the key's order %d exists", p.who(d.first), told.Answer, p.at(told.Return), db[0].ID)
	case d.first >= 0 && told.Answer == history.SoldOut:
		p.refuse(d)
	}
	if len(db) == 0 {
		return
	}
	ret := p.end - 1
	if d.first >= 0 && told.Answer == history.Ordered && told.Order == db[0].ID {
		ret = d.ret
	}
	p.place(first, db[0].ID, db[0].Items, d.call, ret, false)
}

// place is order id's step, of items, placed between call and ret; with
// maybe, an order of unknown id that was placed or never was.
func (p *prepared) place(op int, id int64, items []history.Item, call, ret int64, maybe bool) {
	st := &step{op: op, kind: place, lines: p.lines(items), order: -1, to: created, maybe: maybe}
	if id != 0 {
		st.order = p.order(id)
		if p.window[id] {
			st.to = pending
		}
	}
	st.who, st.what = p.describeStep(op, "placed", id)
	p.add(st, call, ret)
}

// refuse is a sold-out decision's step.
func (p *prepared) refuse(d decision) {
	op := p.src[d.first]
	st := &step{op: d.first, kind: refuse, lines: p.lines(op.Items), order: -1}
	for _, sku := range op.Short {
		st.short = append(st.short, p.sku(sku))
	}
	st.who, st.what = p.describeStep(d.first, "sold out", 0)
	p.add(st, d.call, d.ret)
}

// decisive reports whether an order's answer decides its key.
func decisive(op history.Op) bool {
	return op.Answer == history.Ordered || op.Answer == history.SoldOut || op.Answer == history.Limit
}

// sameOrder reports whether two final answers to one key agree.
func sameOrder(a, b history.Op) bool { return a.Answer == b.Answer && a.Order == b.Order }
