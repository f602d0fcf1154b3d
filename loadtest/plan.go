package loadtest

import (
	"errors"
	"fmt"
	"time"
)

// Plan is the load each strategy of a demo or bench gets.
type Plan struct {
	Strategies []string `json:"strategies,omitempty"` // by name; empty means every one
	Instances  int      `json:"instances"`            // shop instances per strategy (K)
	Stock      int      `json:"stock"`                // units on sale in a burst (S)
	// Burst is D buyers. With a cart mix (Cart, which demo and bench set
	// alike in Burst, Steady and Closed), a load puts its stock on each of
	// its HotSKUs: Stock units each in the burst.
	Burst Burst `json:"burst"`
	// Steady, when its Rate is set, follows the burst on a SKU of its own
	// with stock for every buyer: the latency of placing orders under a
	// steady load.
	Steady Steady `json:"steady"`
	// Closed, when its Duration is set, follows on a SKU of its own with
	// stock for every buyer: the throughput mode, the most orders per
	// second each strategy sustains.
	Closed Closed `json:"closed"`
	// Surge, when its Rate is set, follows on a SKU of its own with stock
	// for a tenth of its arrivals: an open loop past capacity.
	Surge Surge `json:"surge"`
	// PaymentWindow, when set, is the shops' SHOP_PAYMENT_WINDOW, and makes
	// the burst an abandoned-cart sale (Carts) in which a share Unpaid of
	// the winners never pay.
	PaymentWindow time.Duration `json:"payment_window_ns,omitempty"`
	Unpaid        float64       `json:"unpaid,omitempty"`
	// Check records each burst's history and checks every answer in it
	// against the model of the shop (internal/lincheck); HistoryDir, if
	// set, is where each strategy's history and its page are written, and
	// implies Check.
	Check      bool   `json:"check,omitempty"`
	HistoryDir string `json:"-"`
}

// Validate reports every bad setting at once. The strategies' names are
// the caller's to check.
func (p Plan) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if p.Instances < 1 {
		bad("instances must be at least 1, not %d", p.Instances)
	}
	if p.Stock <= 0 {
		bad("stock must be at least 1 unit, not %d", p.Stock)
	}
	if p.Burst.Buyers < p.Stock {
		bad("buyers (%d) must be at least the stock (%d): with fewer, nothing sells out and nothing can be oversold", p.Burst.Buyers, p.Stock)
	}
	if p.Burst.Concurrency < 0 || p.Steady.Concurrency < 0 {
		bad("concurrency must not be negative")
	}
	if p.Steady.Rate < 0 || p.Steady.Duration < 0 {
		bad("rate and duration must not be negative")
	}
	if p.Closed.Duration < 0 || p.Closed.Duration > 0 && p.Closed.Buyers < 1 {
		bad("a closed loop needs at least 1 buyer and a duration that is not negative")
	}
	if p.Closed.P99 < 0 {
		bad("the closed loop's p99 bound must not be negative")
	}
	if p.Steady.Rate > 0 && p.Steady.Buyers() < 1 {
		bad("rate %g/s for %s sends no buyers: set a longer duration", p.Steady.Rate, p.Steady.Duration)
	}
	if err := p.Surge.validate(); err != nil {
		errs = append(errs, err)
	}
	if p.Unpaid < 0 || p.Unpaid >= 1 {
		bad("unpaid is the share of winners who never pay: at least 0 and less than 1, not %g", p.Unpaid)
	}
	if p.Unpaid > 0 && p.PaymentWindow <= 0 {
		bad("unpaid (%g) needs a payment window (--payment-window): without one an order is final when placed, nothing to pay", p.Unpaid)
	}
	if p.Burst.Arrivals < 0 || p.Burst.OvertakeGap < 0 {
		bad("arrivals and the overtake gap must not be negative")
	}
	if p.Burst.Arrivals > 0 && p.Burst.Concurrency > 0 {
		bad("arrivals (%s) and concurrency (%d) do not go together: buyers arriving in order are each sent on time, however many are in flight", p.Burst.Arrivals, p.Burst.Concurrency)
	}
	if p.Burst.Arrivals > 0 && p.PaymentWindow > 0 {
		bad("arrivals (%s) and a payment window do not go together: the abandoned-cart sale's buyers keep trying until every unit is paid", p.Burst.Arrivals)
	}
	if err := validCart(p.Burst.Cart); err != nil {
		bad("%v", err)
	}
	if p.Burst.Cart >= 2 && p.PaymentWindow > 0 {
		bad("a cart mix (cart %d) and a payment window (--payment-window or SHOP_PAYMENT_WINDOW) do not go together: the abandoned-cart sale sells one SKU, until every unit of it is paid", p.Burst.Cart)
	}
	return errors.Join(errs...)
}

// Carts returns the abandoned-cart sale of the plan's burst.
func (p Plan) Carts() Carts {
	return Carts{Burst: p.Burst, Stock: p.Stock, Unpaid: p.Unpaid, Window: p.PaymentWindow}
}

// Requests returns how many requests the plan sends per strategy, for a
// progress bar, or -1 if that is not known beforehand: the buyers of an
// abandoned-cart sale try until every unit is paid.
func (p Plan) Requests() int {
	if p.PaymentWindow > 0 {
		return -1
	}
	n := p.Burst.Buyers
	if p.Steady.Rate > 0 {
		n += p.Steady.Buyers()
	}
	if p.Surge.Rate > 0 {
		n += p.Surge.Arrivals()
	}
	return n
}
