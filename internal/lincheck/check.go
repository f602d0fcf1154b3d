package lincheck

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stockguard/shop/internal/history"
)

// Result is a history's verdict.
type Result struct {
	Linearizable bool  `json:"linearizable"`
	Ops          int   `json:"ops"`
	CheckMS      int64 `json:"check_ms"`
	// FirstViolation names the first answer that no order of the
	// operations explains: who, what it was told, and what the model
	// allows there.
	FirstViolation string `json:"first_violation,omitempty"`
	// Unknown is set when the search ran out of time: no verdict.
	Unknown bool `json:"unknown,omitempty"`
	model   porcupine.Model
	p       *prepared
}

// Check checks ops against the model, searching for at most timeout.
// A partition in which no unit comes back is checked exactly without a
// search (exact.go); porcupine searches the others.
func Check(ops []history.Op, timeout time.Duration) Result {
	start := time.Now()
	p := prepare(ops)
	r := Result{Ops: len(ops), model: p.model(), p: p}
	var search []porcupine.Operation
	var exact string
	for _, part := range p.partition(p.steps) {
		stock, ok := monotone(part)
		if !ok {
			search = append(search, part...)
		} else if v := p.exact(part, stock); v != "" && exact == "" {
			exact = v
		}
	}
	verdict, info := porcupine.CheckOperationsVerbose(r.model, search, timeout)
	r.CheckMS = time.Since(start).Milliseconds()
	r.Unknown = verdict == porcupine.Unknown
	r.Linearizable = verdict == porcupine.Ok && len(p.violations) == 0 && exact == ""
	switch {
	case len(p.violations) > 0:
		r.FirstViolation = p.violations[0].text
	case exact != "":
		r.FirstViolation = exact
	case verdict == porcupine.Illegal:
		r.FirstViolation = p.blocked(r.model, search, info)
	case r.Unknown:
		r.FirstViolation = fmt.Sprintf("no verdict: the search took longer than %s", timeout)
	}
	return r
}

// String is the verdict in a line.
func (r Result) String() string {
	switch {
	case r.Linearizable:
		return fmt.Sprintf("linearizable: %d operations, checked in %d ms", r.Ops, r.CheckMS)
	case r.Unknown:
		return fmt.Sprintf("unknown: %d operations, %s", r.Ops, r.FirstViolation)
	}
	return fmt.Sprintf("NOT linearizable: %d operations, checked in %d ms; first impossible answer: %s", r.Ops, r.CheckMS, r.FirstViolation)
}

// Visualize writes porcupine's page of the history: each client's
// operations on a time line, the longest order of them that the model
// explains, and the state after each, with the first impossible answer
// marked. The page's search is bounded by a few seconds: an impossible
// history shows the longest order found by then.
func (r Result) Visualize(w io.Writer) error {
	_, info := porcupine.CheckOperationsVerbose(r.model, r.p.steps, visualizeFor)
	info.AddAnnotations(r.p.annotations(r))
	return porcupine.Visualize(r.model, info, w)
}

// visualizeFor bounds the search behind a page.
const visualizeFor = 3 * time.Second

// VisualizePath writes the page to path.
func (r Result) VisualizePath(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.Visualize(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// annotations mark the verdict on the page: each violation that the
// per-key checks found at the operation that told it, and the first
// impossible answer.
func (p *prepared) annotations(r Result) []porcupine.Annotation {
	var as []porcupine.Annotation
	for _, v := range p.violations {
		op := p.src[v.op]
		as = append(as, porcupine.Annotation{ClientId: op.Client, Start: op.Call - p.base, End: op.Return - p.base,
			Description: "impossible answer", Details: v.text, BackgroundColor: "#f8b4b4"})
	}
	if len(p.src) > 0 {
		verdict, color := "linearizable", "#bbf7d0"
		if !r.Linearizable {
			verdict, color = "NOT linearizable: hover for the first impossible answer", "#fde68a"
		}
		as = append(as, porcupine.Annotation{Tag: "verdict", Start: 0, End: 0,
			Description: verdict, Details: r.String(), BackgroundColor: color})
	}
	return as
}

// blocked names the operation at which the search stopped, in the first
// partition that has no order of all its steps: of the steps outside the
// longest order it found, the one that returned first.
func (p *prepared) blocked(model porcupine.Model, steps []porcupine.Operation, info porcupine.LinearizationInfo) string {
	parts := p.partition(steps)
	for i, partials := range info.PartialLinearizations() {
		part := parts[i]
		var longest []int
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(part) {
			continue
		}
		s := model.Init()
		for _, j := range longest {
			_, s = model.Step(s, part[j].Input, nil)
		}
		stuck := -1
		for j, op := range part {
			if !slices.Contains(longest, j) && (stuck < 0 || op.Return < part[stuck].Return) {
				stuck = j
			}
		}
		st := part[stuck].Input.(*step)
		return fmt.Sprintf("%s (called %s, answered %s): %s; the answers before it leave %s",
			st.name(), p.at(part[stuck].Call+p.base), p.at(part[stuck].Return+p.base), why(st), model.DescribeState(s))
	}
	return "no order of the operations explains the answers"
}

// why says what a step's answer needs that the model could not give.
func why(st *step) string {
	switch st.kind {
	case refuse:
		return "sold out needs fewer units than asked at one point between its call and its answer"
	case place:
		return "an order needs its units available at one point between its call and its answer (else: an oversell)"
	case readStock:
		return fmt.Sprintf("a read of %d needs that many available at one point between its call and its answer", st.value)
	case final:
		return "the final state in the database must be what the answers add up to"
	case giveBack, pay, mustBe:
		return fmt.Sprintf("needs the order to be %s then", names(st.from))
	}
	return "no point between its call and its answer allows it"
}

func names(sts []status) string {
	s := make([]string, len(sts))
	for i, st := range sts {
		s[i] = st.String()
	}
	return strings.Join(s, " or ")
}

// describeStep names op's step on the page: what it asked and was told.
// The client is the page's row; the verdict names it (name).
func (p *prepared) describeStep(op int, told string, order int64) (who, what string) {
	o := p.src[op]
	var b strings.Builder
	b.WriteString(string(o.Kind))
	for i, it := range o.Items {
		sep := " "
		if i > 0 {
			sep = ", "
		}
		switch {
		case len(o.Items) == 1 && it.Quantity == 0:
		case len(o.Items) == 1:
			fmt.Fprintf(&b, "%s%d", sep, it.Quantity)
		default:
			fmt.Fprintf(&b, "%s%s×%d", sep, it.SKU, it.Quantity)
		}
	}
	if order != 0 {
		fmt.Fprintf(&b, " #%d", order)
	}
	fmt.Fprintf(&b, " → %s", told)
	return p.who(op), b.String()
}

// name is a step in words: who, what it asked and was told.
func (st *step) name() string { return st.who + ": " + st.what }
