package lincheck

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// status is an order's status in the model; none before it is placed.
type status byte

const (
	none status = iota
	pending
	created
	paid
	cancelled
	refunded
	lapsed // pending past its payment deadline: it can no longer be paid
)

var statusNames = [...]string{"none", "pending", "created", "paid", "cancelled", "refunded", "pending, past its deadline"}

func (s status) String() string { return statusNames[s] }

// statusesOf is the model's statuses that a status the shop reports
// stands for: a pending order may be past its deadline.
func statusesOf(name string) ([]status, bool) {
	i := slices.Index(statusNames[:lapsed], name)
	switch {
	case i <= 0:
		return nil, false
	case status(i) == pending:
		return []status{pending, lapsed}, true
	}
	return []status{status(i)}, true
}

// state is the shop as the model sees it: available units by SKU, and
// each order's status, by the indexes the preparation gave them.
type state struct {
	avail []int
	st    []status
}

// kind is what a step does to the state.
type kind byte

const (
	place     kind = iota // an order placed: every line taken
	refuse                // a sold-out: a line short
	giveBack              // a refund, a cancellation or an expiry: the order's units return
	pay                   // a payment: pending to paid
	mustBe                // an answer true only while the order is in one of want
	set                   // a stock set
	adjust                // an adjustment
	noRoom                // insufficient-stock: the adjustment would go below 0
	readStock             // a stock read
	lapse                 // an order's payment deadline passes
	final                 // the final state
)

// line is an order's line, or a stock change, by SKU index.
type line struct{ sku, qty int }

// step is one operation of the model: an operation of the history, or
// the decision of one key, which may stand for several.
type step struct {
	op    int    // the index in the history of the operation it names
	who   string // who asked, in words: a client, or the shop
	what  string // what it asked and was told, in words, for the page
	kind  kind
	lines []line
	short []int // a sold-out's SKUs named short
	order int   // the order's index, or -1
	from  []status
	to    status
	value int
	maybe bool // the answer is unknown: it took effect, or never did
	// the final state's, for final
	stock []line
	sts   []struct {
		order int
		st    []status
	}
}

// apply returns the states s can go to through st: none if the step's
// answer cannot be given in s.
func (st *step) apply(s state) []any {
	next, ok := st.take(s)
	switch {
	case st.maybe && ok:
		return []any{s, next}
	case st.maybe:
		return []any{s}
	case ok:
		return []any{next}
	}
	return nil
}

// take is the step taking effect on s, and whether its answer is true
// there.
func (st *step) take(s state) (state, bool) {
	switch st.kind {
	case place:
		if st.order >= 0 && s.st[st.order] != none {
			return s, false
		}
		for _, l := range st.lines {
			if s.avail[l.sku] < l.qty {
				return s, false
			}
		}
		n := s.clone(true, st.order >= 0)
		for _, l := range st.lines {
			n.avail[l.sku] -= l.qty
		}
		if st.order >= 0 {
			n.st[st.order] = st.to
		}
		return n, true
	case refuse:
		for _, sku := range st.short {
			if i := slices.IndexFunc(st.lines, func(l line) bool { return l.sku == sku }); i >= 0 && s.avail[sku] >= st.lines[i].qty {
				return s, false
			}
		}
		return s, slices.ContainsFunc(st.lines, func(l line) bool { return s.avail[l.sku] < l.qty })
	case giveBack, pay:
		if !slices.Contains(st.from, s.st[st.order]) {
			return s, false
		}
		n := s.clone(st.kind == giveBack, true)
		n.st[st.order] = st.to
		if st.kind == giveBack {
			for _, l := range st.lines {
				n.avail[l.sku] += l.qty
			}
		}
		return n, true
	case mustBe:
		return s, slices.Contains(st.from, s.st[st.order])
	case set, adjust:
		l := st.lines[0]
		v := l.qty
		if st.kind == adjust {
			v += s.avail[l.sku]
		}
		if v < 0 {
			return s, false
		}
		n := s.clone(true, false)
		n.avail[l.sku] = v
		return n, true
	case noRoom:
		return s, s.avail[st.lines[0].sku]+st.lines[0].qty < 0
	case readStock:
		return s, s.avail[st.lines[0].sku] == st.value
	case lapse:
		if s.st[st.order] != pending {
			return s, true
		}
		n := s.clone(false, true)
		n.st[st.order] = lapsed
		return n, true
	case final:
		for _, l := range st.stock {
			if s.avail[l.sku] != l.qty {
				return s, false
			}
		}
		for _, o := range st.sts {
			if !slices.Contains(o.st, s.st[o.order]) {
				return s, false
			}
		}
		return s, true
	}
	panic(fmt.Sprintf("lincheck: step of kind %d", st.kind))
}

// clone copies what a step changes.
func (s state) clone(avail, st bool) state {
	if avail {
		s.avail = slices.Clone(s.avail)
	}
	if st {
		s.st = slices.Clone(s.st)
	}
	return s
}

// model is the shop's model for a prepared history: its SKUs and orders
// named, for the visualization.
func (p *prepared) model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: p.partition,
		Init: func() []any {
			return []any{state{avail: make([]int, len(p.skus)), st: make([]status, len(p.orders))}}
		},
		Step: func(s, input, _ any) []any { return input.(*step).apply(s.(state)) },
		Equal: func(a, b any) bool {
			x, y := a.(state), b.(state)
			return slices.Equal(x.avail, y.avail) && slices.Equal(x.st, y.st)
		},
		Hash: func(s any) uint64 {
			x := s.(state)
			h := fnv.New64a()
			for _, v := range x.avail {
				h.Write([]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
			}
			for _, v := range x.st {
				h.Write([]byte{byte(v)})
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, _ any) string { return input.(*step).what },
		DescribeState:     func(s any) string { return p.describe(s.(state)) },
	}
	return nm.ToModel()
}

// describe puts s in words: each SKU's units, and how many orders are in
// each status.
func (p *prepared) describe(s state) string {
	var b strings.Builder
	for i, sku := range p.skus {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d left", sku, s.avail[i])
	}
	var counts [len(statusNames)]int
	for _, st := range s.st {
		counts[st]++
	}
	for st, n := range counts {
		if st > 0 && n > 0 {
			fmt.Fprintf(&b, "; %d %s", n, status(st))
		}
	}
	return b.String()
}

// partition splits the history by SKU: a cart joins its SKUs.
func (p *prepared) partition(ops []porcupine.Operation) [][]porcupine.Operation {
	byRoot := make(map[int][]porcupine.Operation)
	var roots []int
	for _, op := range ops {
		r := p.root(op.Input.(*step).skuOf())
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], op)
	}
	parts := make([][]porcupine.Operation, len(roots))
	for i, r := range roots {
		parts[i] = byRoot[r]
	}
	return parts
}

// skuOf is one of the SKUs the step touches: a final state's step has
// one per partition.
func (st *step) skuOf() int { return st.lines[0].sku }
