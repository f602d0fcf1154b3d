package lincheck

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/anishathalye/porcupine"
)

// A partition in which no unit ever comes back (its stock set once,
// before anything else, then only orders placed, sold-outs and the final
// state) is checked exactly without a search, in O(n log n). There the
// stock only falls, so:
//
//   - the orders can be taken in any order if and only if no SKU's
//     orders add up to more than its stock;
//   - taking each order as early as it can be taken, at its call, leaves
//     at every moment the fewest units any order could leave; and a
//     sold-out is best taken as late as it can be, at its answer;
//
// so every sold-out is explained at once by some order exactly when each
// is explained with the orders at their calls and the sold-out at its
// answer. The final state must be the stock less every order. This is
// the model's own verdict, reached without trying orders one by one; a
// search that must reject an oversell among 2,000 buyers by trying every
// order of them would not end.

// monotone reports whether part is such a partition, and its stock.
func monotone(part []porcupine.Operation) (stock map[int]int, ok bool) {
	stock = make(map[int]int)
	first := int64(-1) // the first call of a step other than a set
	var lastSet int64
	for _, op := range part {
		st := op.Input.(*step)
		switch {
		case st.maybe:
			return nil, false
		case st.kind == set:
			if _, twice := stock[st.lines[0].sku]; twice {
				return nil, false
			}
			stock[st.lines[0].sku] = st.lines[0].qty
			lastSet = max(lastSet, op.Return)
		case st.kind == place || st.kind == refuse || st.kind == final:
			if first < 0 || op.Call < first {
				first = op.Call
			}
		default:
			return nil, false
		}
	}
	return stock, first < 0 || lastSet < first
}

// exact checks a monotone partition and names its first impossible
// answer, or returns "".
func (p *prepared) exact(part []porcupine.Operation, stock map[int]int) string {
	type event struct {
		at    int64
		taken bool // an order's units taken, else a sold-out to check
		op    porcupine.Operation
	}
	var events []event
	total := make(map[int]int)
	var placed []porcupine.Operation
	for _, op := range part {
		switch st := op.Input.(*step); st.kind {
		case place:
			events = append(events, event{at: op.Call, taken: true, op: op})
			placed = append(placed, op)
			for _, l := range st.lines {
				total[l.sku] += l.qty
			}
		case refuse:
			events = append(events, event{at: op.Return, op: op})
		}
	}
	// An oversell: the order that took the first unit too many, taking
	// them by answer.
	slices.SortFunc(placed, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
	taken := make(map[int]int)
	for _, op := range placed {
		st := op.Input.(*step)
		for _, l := range st.lines {
			if taken[l.sku] += l.qty; taken[l.sku] > stock[l.sku] {
				return fmt.Sprintf("%s (answered %s): an oversell: %d units of %s were on sale, and the orders answered by then took %d",
					st.name(), p.at(op.Return+p.base), stock[l.sku], p.skus[l.sku], taken[l.sku])
			}
		}
	}
	// Orders at their calls, sold-outs at their answers; at one moment,
	// the orders first (intervals are closed).
	slices.SortStableFunc(events, func(a, b event) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		if a.taken == b.taken {
			return 0
		}
		if a.taken {
			return -1
		}
		return 1
	})
	avail := make(map[int]int)
	for sku, n := range stock {
		avail[sku] = n
	}
	for _, e := range events {
		st := e.op.Input.(*step)
		if e.taken {
			for _, l := range st.lines {
				avail[l.sku] -= l.qty
			}
			continue
		}
		if why := soldOutWrong(st, avail); why != "" {
			return fmt.Sprintf("%s (called %s, answered %s): %s", st.name(), p.at(e.op.Call+p.base), p.at(e.op.Return+p.base), p.unitsLeft(why, st, avail))
		}
	}
	for _, op := range part {
		if st := op.Input.(*step); st.kind == final {
			for _, l := range st.stock {
				if want := stock[l.sku] - total[l.sku]; l.qty != want {
					return fmt.Sprintf("the final state: %s has %d available in the database, but its stock of %d less the orders placed leaves %d",
						p.skus[l.sku], l.qty, stock[l.sku], want)
				}
			}
		}
	}
	return ""
}

// soldOutWrong says which SKU a sold-out could not have been short of,
// with avail the fewest units left at its answer.
func soldOutWrong(st *step, avail map[int]int) string {
	for _, sku := range st.short {
		if i := slices.IndexFunc(st.lines, func(l line) bool { return l.sku == sku }); i >= 0 && avail[sku] >= st.lines[i].qty {
			return "named"
		}
	}
	if slices.ContainsFunc(st.lines, func(l line) bool { return avail[l.sku] < l.qty }) {
		return ""
	}
	return "every"
}

func (p *prepared) unitsLeft(_ string, st *step, avail map[int]int) string {
	l := st.lines[0]
	for _, x := range st.lines {
		if avail[x.sku] >= x.qty {
			l = x
			break
		}
	}
	return fmt.Sprintf("sold out, but even with every order taken as early as it could be, %d units of %s were left when it was answered, for %d asked",
		avail[l.sku], p.skus[l.sku], l.qty)
}
