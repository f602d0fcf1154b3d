package lincheck

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stockguard/shop/internal/history"
)

// prepared is a history made ready for the search: one step per key
// decision, read, stock change or final state, and what the per-key
// checks already found.
type prepared struct {
	src      []history.Op
	skus     []string
	skuIdx   map[string]int
	parent   []int // union-find over SKU indexes: a cart joins its SKUs
	orders   []int64
	orderIdx map[int64]int
	window   map[int64]bool           // orders placed with a payment window
	linesOf  map[int64][]history.Item // each order's lines, as the final state or an answer has them
	byKey    map[string][]history.FinalOrder
	final    *history.Op
	finalOp  int   // its index
	end      int64 // when the final state was read: unknown answers took effect before it
	// base is the history's first call: the search's times count from it,
	// small enough for the page's JavaScript numbers to hold exactly.
	base       int64
	steps      []porcupine.Operation
	violations []violation
}

// violation is an answer that no order of the operations explains.
type violation struct {
	at   int64 // when it was given
	op   int   // the operation, by its index in the history
	text string
}

func prepare(ops []history.Op) *prepared {
	p := &prepared{src: ops, skuIdx: make(map[string]int), orderIdx: make(map[int64]int), window: make(map[int64]bool),
		linesOf: make(map[int64][]history.Item), byKey: make(map[string][]history.FinalOrder)}
	if len(ops) > 0 {
		p.base = ops[0].Call
	}
	for i := range ops {
		p.base = min(p.base, ops[i].Call)
		if ops[i].Kind == history.State && ops[i].Final != nil {
			p.final, p.finalOp = &ops[i], i
		}
		for _, sku := range ops[i].SKUs() {
			p.sku(sku)
		}
		p.end = max(p.end, ops[i].Return+1)
	}
	if p.final != nil {
		p.end = p.final.Call
		for _, o := range p.final.Final.Orders {
			p.order(o.ID)
			p.window[o.ID] = o.Window
			p.linesOf[o.ID] = o.Items
			p.byKey[keyOf(o.User, o.Key)] = append(p.byKey[keyOf(o.User, o.Key)], o)
		}
	}
	for _, op := range ops {
		if op.Kind == history.Order && op.Answer == history.Ordered && p.linesOf[op.Order] == nil {
			p.order(op.Order)
			p.linesOf[op.Order] = op.Items
		}
	}
	p.placements()
	p.transitions(history.Refund)
	p.transitions(history.Cancel)
	p.transitions(history.Pay)
	p.shopSteps()
	p.deadlines()
	p.adjustments()
	p.stock()
	p.finalSteps()
	slices.SortFunc(p.violations, func(a, b violation) int { return cmp.Compare(a.at, b.at) })
	return p
}

func keyOf(user, key string) string { return user + "\x00" + key }

func (p *prepared) sku(name string) int {
	if i, ok := p.skuIdx[name]; ok {
		return i
	}
	p.skuIdx[name] = len(p.skus)
	p.skus = append(p.skus, name)
	p.parent = append(p.parent, len(p.parent))
	return len(p.skus) - 1
}

func (p *prepared) root(i int) int {
	for p.parent[i] != i {
		p.parent[i] = p.parent[p.parent[i]]
		i = p.parent[i]
	}
	return i
}

func (p *prepared) join(lines []line) {
	for _, l := range lines[1:] {
		p.parent[p.root(l.sku)] = p.root(lines[0].sku)
	}
}

func (p *prepared) order(id int64) int {
	if i, ok := p.orderIdx[id]; ok {
		return i
	}
	p.orderIdx[id] = len(p.orders)
	p.orders = append(p.orders, id)
	return len(p.orders) - 1
}

func (p *prepared) lines(items []history.Item) []line {
	ls := make([]line, len(items))
	for i, it := range items {
		ls[i] = line{sku: p.sku(it.SKU), qty: it.Quantity}
	}
	return ls
}

// add makes st a step of the search, from call to ret.
func (p *prepared) add(st *step, call, ret int64) {
	if len(st.lines) > 1 {
		p.join(st.lines)
	}
	p.steps = append(p.steps, porcupine.Operation{ClientId: p.src[st.op].Client, Input: st, Call: call - p.base, Return: ret - p.base})
}

func (p *prepared) violate(op int, at int64, format string, args ...any) {
	p.violations = append(p.violations, violation{at: at, op: op, text: fmt.Sprintf(format, args...)})
}

// group is the operations of one kind under one key, by index, in call
// order.
type group struct {
	key string
	ops []int
}

// groups gathers the operations of kind by key: the user's key, or a
// payment's payment_id.
func (p *prepared) groups(kind history.Kind) []group {
	idx := make(map[string]int)
	var gs []group
	for i, op := range p.src {
		if op.Kind != kind {
			continue
		}
		k := keyOf(op.User, op.Key)
		if kind == history.Pay {
			k = op.Key
		}
		g, ok := idx[k]
		if !ok {
			g = len(gs)
			idx[k] = g
			gs = append(gs, group{key: k})
		}
		gs[g].ops = append(gs[g].ops, i)
	}
	return gs
}

// decision is a key's decision: its first final answer, the interval in
// which it was made, and the operations that were unknown.
type decision struct {
	first          int // the operation whose answer is the decision, or -1
	call, ret      int64
	unknown        []int
	contradictions []int // final answers that differ from the first
}

// decide reads a key's decision from its operations: final answers are
// those for which final returns true. A key's first decision is kept and
// replayed, so it was made between the first call and the first final
// answer.
func (p *prepared) decide(ops []int, final func(history.Op) bool, same func(a, b history.Op) bool) decision {
	d := decision{first: -1, call: p.src[ops[0]].Call, ret: p.end - 1}
	for _, i := range ops {
		op := p.src[i]
		switch {
		case op.Answer.Unknown():
			d.unknown = append(d.unknown, i)
		case !final(op):
		case d.first < 0 || op.Return < d.ret:
			if d.first >= 0 && !same(p.src[d.first], op) {
				d.contradictions = append(d.contradictions, d.first)
			}
			d.first, d.ret = i, op.Return
		case !same(p.src[d.first], op):
			d.contradictions = append(d.contradictions, i)
		}
	}
	return d
}

// who names the client of op in words.
func (p *prepared) who(op int) string {
	o := p.src[op]
	switch {
	case o.User != "" && o.Key != "":
		return fmt.Sprintf("buyer %s (key %s, client %d)", o.User, o.Key, o.Client)
	case o.Key != "":
		return fmt.Sprintf("client %d (key %s)", o.Client, o.Key)
	}
	return fmt.Sprintf("client %d", o.Client)
}

// told puts op's answer in words, with when it came.
func (p *prepared) told(op int) string {
	o := p.src[op]
	a := string(o.Answer)
	if o.Answer == history.Ordered {
		a = fmt.Sprintf("order %d", o.Order)
	}
	return fmt.Sprintf("%s at %s", a, p.at(o.Return))
}

// at is t in seconds since the history began.
func (p *prepared) at(t int64) string {
	return fmt.Sprintf("+%.3fs", time.Duration(t-p.base).Seconds())
}
