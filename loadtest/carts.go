package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/payment"
)

// Carts is an abandoned-cart sale, against a shop with a payment window:
// the burst's buyers place their orders, and each winner pays through the
// payment provider's signed callback, but for a share Unpaid of the first
// Stock winners, who never pay. Their units come back when the window ends
// and the shop's expiry job cancels their orders; the buyers told sold out
// (or busy) keep trying, each try with a new Idempotency-Key after a short
// pause, and buy them, and pay. The sale ends once every unit is paid, or
// at its deadline: ten windows and 30 seconds.
//
// Which winners abandon is fixed by the rank of their 201 among the first
// Stock: rank k (from 0) abandons when floor((k+1)·Unpaid) > floor(k·Unpaid),
// so floor(Stock·Unpaid) units exactly, spread evenly. Every later winner
// buys a unit that came back, and pays: the sale can end with every unit
// paid.
type Carts struct {
	Burst
	Stock  int           `json:"stock"`
	Unpaid float64       `json:"unpaid"`
	Window time.Duration `json:"window_ns"`
	// Sample, if set, reads what the sale's units are at, from the
	// database; the sale calls it every SampleEvery, and once at the end.
	Sample func(ctx context.Context, sku string) (CartPoint, error) `json:"-"`
}

// SampleEvery is how often an abandoned-cart sale samples its units.
const SampleEvery = 100 * time.Millisecond

// CartPoint is what the units of an abandoned-cart sale are at, At seconds
// after the buyers were released.
type CartPoint struct {
	At      float64 `json:"at_s"`
	Held    int     `json:"held"`    // in pending orders, waiting for their payment
	Paid    int     `json:"paid"`    // in paid orders
	Expired int     `json:"expired"` // in orders cancelled at the end of their window
	// Resold is the units ordered beyond the stock put on sale, whatever
	// became of their orders since: in a shop that does not oversell, units
	// that came back from an expired order and were ordered again.
	Resold int `json:"resold"`
}

// CartStats is what an abandoned-cart sale came to. The audit, not these
// figures, decides what was sold.
type CartStats struct {
	Abandoned int `json:"abandoned"` // winners who never paid
	Payments  int `json:"payments"`  // callbacks the shop answered 200
	// Late is the payments refused as after their order's window, on a
	// loaded machine: those buyers ordered again, and their orders
	// expired as the abandoned ones did.
	Late int `json:"late"`
	// AllPaid is the seconds from the release until a payment was answered
	// for the last unit of the stock; 0 if none was by the deadline.
	AllPaid float64 `json:"all_paid_s,omitempty"`
	// HeldPeak is the most units the timeline saw held at once; Paid,
	// Expired and Resold are its last sample's, taken after the sale.
	HeldPeak int         `json:"held_peak"`
	Paid     int         `json:"paid"`
	Expired  int         `json:"expired"`
	Resold   int         `json:"resold"`
	Timeline []CartPoint `json:"timeline,omitempty"`
}

// Run sends the abandoned-cart sale to sku. progress, if not nil, is
// called after every answer to an order.
func (c Carts) Run(ctx context.Context, shop Shop, sku string, progress func(Answer)) (Stats, error) {
	switch {
	case c.Buyers < 1 || c.Stock < 1 || c.Window <= 0:
		return Stats{}, fmt.Errorf("loadtest: an abandoned-cart sale needs buyers, stock and a payment window, not %d, %d and %s", c.Buyers, c.Stock, c.Window)
	case len(shop.URLs) == 0:
		return Stats{}, fmt.Errorf("loadtest: no shop URLs")
	case len(shop.PaymentSecret) == 0:
		return Stats{}, errors.New("loadtest: an abandoned-cart sale signs its payments, and the shop has no payment secret")
	case c.Cart >= 2:
		return Stats{}, errors.New("loadtest: an abandoned-cart sale sells one SKU, with no cart mix")
	}
	workers := c.Concurrency
	if workers <= 0 || workers > c.Buyers {
		workers = c.Buyers
	}
	s := &cartSale{Carts: c, shop: shop, sku: sku, progress: progress, client: newClient(workers), run: rand.Text()[:8],
		begin: time.Now(), until: time.Now().Add(10*c.Window + 30*time.Second)}
	defer s.client.CloseIdleConnections()
	stopWatch := s.watch(ctx)
	stats := drive(workers, func(t *tally, _ time.Time, i int) bool {
		if i >= c.Buyers || s.over(ctx) {
			return false
		}
		s.buyer(ctx, t, i)
		return true
	})
	timeline, err := stopWatch()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return Stats{}, fmt.Errorf("loadtest: %w", err)
	}
	stats.Carts = s.stats(timeline)
	return stats, nil
}

// cartSale is one abandoned-cart sale under way.
type cartSale struct {
	Carts
	shop         Shop
	sku, run     string
	progress     func(Answer)
	client       *http.Client
	begin, until time.Time
	wins         atomic.Int64 // 201 answers so far
	abandoned    atomic.Int64
	payments     atomic.Int64
	late         atomic.Int64
	allPaid      atomic.Int64 // nanoseconds from begin, once every unit is paid
}

// over reports whether the buyers may stop: every unit is paid, or the
// deadline or ctx has passed.
func (s *cartSale) over(ctx context.Context) bool {
	return s.payments.Load() >= int64(s.Stock) || time.Now().After(s.until) || ctx.Err() != nil
}

// buyer is buyer i's part in the sale: it orders until it wins, and pays
// unless its win is one to abandon. Told sold out or busy, it tries again
// after a pause of 50 to 100 ms; an order refused otherwise ends its part.
func (s *cartSale) buyer(ctx context.Context, t *tally, i int) {
	user, skus := fmt.Sprintf("buyer-%s-%d", s.run, i), []string{s.sku}
	client := s.shop.History.Client()
	for !s.over(ctx) {
		b := buyer{user: user, key: rand.Text(), url: s.shop.URLs[i%len(s.shop.URLs)]}
		sent, call := time.Now(), s.shop.History.Now()
		out, id, short, err := b.buy(ctx, s.client, skus)
		s.shop.recordOrder(client, call, b, skus, out, id, short)
		t.record(sent, out, err)
		t.told(user, skus, out, id, short)
		if s.progress != nil {
			s.progress(Answer{Outcome: out, Latency: time.Since(sent)})
		}
		switch out {
		case Ordered:
			if s.abandons(s.wins.Add(1) - 1) {
				s.abandoned.Add(1)
				return
			}
			if s.pay(ctx, t, client, b, id) {
				return
			}
		case SoldOut, Busy:
		default:
			return
		}
		sleepUntil(ctx, time.Now().Add(50*time.Millisecond+mrand.N(50*time.Millisecond)))
	}
}

// abandons reports whether the winner of rank k never pays.
func (s *cartSale) abandons(k int64) bool {
	return k < int64(s.Stock) && math.Floor(float64(k+1)*s.Unpaid) > math.Floor(float64(k)*s.Unpaid)
}

// pay pays order id, won by b, and reports whether it is paid. A payment
// that came too late (order-expired) leaves b to try again, as its unit
// comes back; any other refusal counts as a failed request.
func (s *cartSale) pay(ctx context.Context, t *tally, client int, b buyer, id int64) bool {
	paymentID := "pay-" + s.run + "-" + strconv.FormatInt(id, 10)
	call := s.shop.History.Now()
	err := b.pay(ctx, s.client, s.shop.PaymentSecret, id, paymentID)
	if s.shop.History != nil {
		answer := history.OK
		if err != nil {
			answer = history.Error
			if errors.Is(err, errExpired) {
				answer = history.Answer(errExpired.Error())
			}
		}
		s.shop.History.Add(history.Op{Client: client, Kind: history.Pay, Key: paymentID, Order: id, Call: call, Return: s.shop.History.Now(), Answer: answer})
	}
	switch {
	case err == nil:
		if s.payments.Add(1) == int64(s.Stock) {
			s.allPaid.Store(int64(time.Since(s.begin)))
		}
		return true
	case errors.Is(err, errExpired):
		s.late.Add(1)
		return false
	}
	t.counts[Failed]++
	if t.err == "" {
		t.err = err.Error()
	}
	return true
}

// errExpired is the shop's answer to a payment after the order's deadline.
var errExpired = errors.New("order-expired")

// pay sends the payment provider's callback for order id, signed with
// secret, as internal/payment signs it.
func (b buyer) pay(ctx context.Context, client *http.Client, secret []byte, id int64, paymentID string) error {
	body, _ := json.Marshal(map[string]string{"payment_id": paymentID})
	url := b.url + "/api/v1/orders/" + strconv.FormatInt(id, 10) + "/pay"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(payment.Header, payment.Sign(secret, time.Now(), body))
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("pay order %d: %w", id, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var answer struct{ Type string }
	json.Unmarshal(data, &answer) // a body that is not JSON leaves it empty
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusConflict && answer.Type == errExpired.Error():
		return errExpired
	}
	return fmt.Errorf("pay order %d: %s: %.200s", id, resp.Status, data)
}

// watch samples the sale's units every SampleEvery until stop, which
// takes a last sample and returns them all, or the first error.
func (s *cartSale) watch(ctx context.Context) (stop func() ([]CartPoint, error)) {
	if s.Sample == nil {
		return func() ([]CartPoint, error) { return nil, nil }
	}
	var timeline []CartPoint
	var err error
	sample := func() {
		if err == nil {
			var p CartPoint
			p, err = s.Sample(ctx, s.sku)
			p.At = time.Since(s.begin).Seconds()
			timeline = append(timeline, p)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(SampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	})
	return func() ([]CartPoint, error) {
		close(done)
		wg.Wait()
		sample()
		if err != nil {
			return nil, fmt.Errorf("sample the units of %s: %w", s.sku, err)
		}
		return timeline, nil
	}
}

// stats sums the sale up.
func (s *cartSale) stats(timeline []CartPoint) *CartStats {
	c := &CartStats{Abandoned: int(s.abandoned.Load()), Payments: int(s.payments.Load()), Late: int(s.late.Load()),
		AllPaid: time.Duration(s.allPaid.Load()).Seconds(), Timeline: timeline}
	for _, p := range timeline {
		c.HeldPeak = max(c.HeldPeak, p.Held)
	}
	if n := len(timeline); n > 0 {
		last := timeline[n-1]
		c.Paid, c.Expired, c.Resold = last.Paid, last.Expired, last.Resold
	}
	return c
}
