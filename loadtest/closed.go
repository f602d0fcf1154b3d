package loadtest

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Closed is a closed loop: each of Buyers buyers places an order, waits for
// the answer and places the next, for Duration. With stock for every buyer
// it shows the most orders per second the shop sustains, and at what
// latency.
//
// With MaxBuyers above Buyers it is a search (Search): the loop runs again
// with twice the buyers, up to MaxBuyers, for as long as more buyers are
// served faster within the P99 bound. A strategy that puts many buyers in
// one commit sustains more with more buyers waiting; one that serves them
// one at a time does not.
type Closed struct {
	Buyers    int           `json:"buyers"`
	Duration  time.Duration `json:"duration_ns"`
	MaxBuyers int           `json:"max_buyers,omitempty"`
	P99       time.Duration `json:"p99_bound_ns,omitempty"` // 0: no bound
	Cart      int           `json:"cart,omitempty"`         // the cart mix, as Burst's
}

// ClosedStep is one loop of a search: its buyers, what it sustained, and
// its p99 in milliseconds.
type ClosedStep struct {
	Buyers    int     `json:"buyers"`
	PerSecond float64 `json:"per_second"`
	P99       float64 `json:"p99_ms"`
}

// A step improves on the best before it when it sustains at least gain
// times as much; the search ends after patience steps in a row that do
// not, as the rate levels off or falls. One step alone can be noise.
const (
	gain     = 1.05
	patience = 2
)

// Search runs step with Buyers buyers, then with twice as many, and so on
// up to MaxBuyers. It stops after a step that failed (ok false) or broke
// the P99 bound, and after two steps in a row that did not sustain 5% more
// than the best before them. best is the buyers of the step that sustained
// the most within the bound: the highest sustained rate. A failed step is
// best, so that its failure is reported, and so is a first step that broke
// the bound.
func (c Closed) Search(step func(buyers int) (ClosedStep, bool, error)) (best int, steps []ClosedStep, err error) {
	top, flat := -1.0, 0 // the first step within the bound is the best so far
	for n := c.Buyers; n >= 1 && (n == c.Buyers || n <= c.MaxBuyers) && flat < patience; n *= 2 {
		st, ok, err := step(n)
		if err != nil {
			return best, steps, err
		}
		steps = append(steps, st)
		bounded := c.P99 <= 0 || st.P99 <= float64(c.P99)/float64(time.Millisecond)
		switch {
		case !ok || best == 0 && !bounded:
			return n, steps, nil
		case !bounded:
			return best, steps, nil
		}
		if st.PerSecond >= gain*top {
			flat = 0
		} else {
			flat++
		}
		if st.PerSecond > top {
			best, top = n, st.PerSecond
		}
	}
	return best, steps, nil
}

// describe says what the loop runs, for a report.
func (c Closed) describe() string {
	if c.MaxBuyers <= c.Buyers {
		return fmt.Sprintf("a closed loop of %d buyers for %s", c.Buyers, c.Duration)
	}
	bound := ""
	if c.P99 > 0 {
		bound = fmt.Sprintf(" or p99 passes %s", c.P99)
	}
	return fmt.Sprintf("closed loops of %d buyers for %s, doubled up to %d until orders/s grow by less than 5%% twice in a row%s; the best", c.Buyers, c.Duration, c.MaxBuyers, bound)
}

// Run sends the closed loop to sku.
func (c Closed) Run(ctx context.Context, shop Shop, sku string, progress func(Answer)) (Stats, error) {
	if c.Buyers < 1 || c.Duration <= 0 {
		return Stats{}, fmt.Errorf("loadtest: a closed loop needs buyers and a duration, not %d for %s", c.Buyers, c.Duration)
	}
	return fire(ctx, shop, sku, c.Cart, math.MaxInt, c.Buyers, schedule{until: time.Now().Add(c.Duration)}, progress)
}
