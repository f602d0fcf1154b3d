package loadtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/stockguard/shop/internal/audit"
)

// Outcome is how the shop answered one buyer.
type Outcome int

// The outcomes, by status and, for a 409, by problem type.
const (
	Ordered      Outcome = iota // 201
	SoldOut                     // 409 sold-out
	LimitReached                // 409 limit-reached
	Busy                        // 503: nothing was decided, the buyer may retry
	Failed                      // anything else, transport errors included
)

var outcomeNames = [...]string{"ordered", "sold-out", "limit-reached", "busy", "error"}

func (o Outcome) String() string { return outcomeNames[o] }

// Answer is one buyer's answer, as a load hears it.
type Answer struct {
	Outcome Outcome
	Latency time.Duration
}

// Classify maps an answer to its outcome.
func Classify(status int, problemType string) Outcome {
	switch {
	case status == http.StatusCreated:
		return Ordered
	case status == http.StatusConflict && problemType == "sold-out":
		return SoldOut
	case status == http.StatusConflict && problemType == "limit-reached":
		return LimitReached
	case status == http.StatusServiceUnavailable:
		return Busy
	}
	return Failed
}

// Burst releases Buyers buyers at once through a start gate, each with its
// own user and Idempotency-Key, buying one unit, or with a cart mix one
// unit of each SKU of a cart.
type Burst struct {
	Buyers int `json:"buyers"`
	// Concurrency caps the requests in flight; 0 sends all buyers at once.
	Concurrency int `json:"concurrency"`
	// Cart, at 2 or more, makes every order a cart of 2 to Cart distinct
	// SKUs drawn from the load's HotSKUs, in random order; 0 or 1 orders
	// the load's SKU alone.
	Cart int `json:"cart,omitempty"`
	// Arrivals, if set, spreads the buyers evenly over it instead of
	// releasing them at once: buyer i is sent at i×Arrivals/Buyers, on
	// time whatever the answers before it (open loop), and the load keeps
	// each buyer's Arrival, from which Fair measures who won.
	Arrivals time.Duration `json:"arrivals_ns,omitempty"`
	// OvertakeGap is how much earlier a refused buyer must have arrived
	// than a winner for the pair to count as an overtake (Fair).
	OvertakeGap time.Duration `json:"overtake_gap_ns,omitempty"`
}

// Steady sends buyers at a fixed rate for a duration. Each latency is
// measured from when its request was due, not from when it was sent, so a
// stalled shop shows in the figures instead of slowing the load down
// (no coordinated omission).
type Steady struct {
	Rate        float64       `json:"rate"` // buyers per second
	Duration    time.Duration `json:"duration_ns"`
	Concurrency int           `json:"concurrency"`    // requests in flight at most; 0 means 256
	Cart        int           `json:"cart,omitempty"` // the cart mix, as Burst's
}

// Buyers returns how many buyers s sends.
func (s Steady) Buyers() int { return int(s.Rate * s.Duration.Seconds()) }

// Stats is what the buyers saw. The audit, not these counts, decides what
// was sold.
type Stats struct {
	Requests     int     `json:"requests"`
	Ordered      int     `json:"ordered"`
	SoldOut      int     `json:"sold_out"`
	LimitReached int     `json:"limit_reached"`
	Busy         int     `json:"busy"`
	Errors       int     `json:"errors"`
	FirstError   string  `json:"first_error,omitempty"`
	Seconds      float64 `json:"seconds"`        // from release to the last answer
	Throughput   float64 `json:"throughput_rps"` // answers per second
	Latency      Latency `json:"latency_ms"`
	// Acked is the orders answered with 201: their ids and SKUs, and
	// Owners the user who placed each, by id.
	Acked  []audit.Acked    `json:"-"`
	Owners map[int64]string `json:"-"`
	// SoldOutSKUs counts the sold-out answers by the SKUs they named
	// short; one to an order of one SKU names it.
	SoldOutSKUs map[string]int `json:"sold_out_skus,omitempty"`
	// BusyOrders is the SKUs of each order answered busy.
	BusyOrders [][]string `json:"-"`
	// Carts is what an abandoned-cart sale came to, and its timeline.
	Carts *CartStats `json:"carts,omitempty"`
	// Arrivals is every buyer of a burst with Arrivals set, by rank.
	Arrivals []Arrival `json:"-"`
	// Surge is what a surge measured beyond these, for its report.
	Surge *SurgeStats `json:"-"`
}

// Latency percentiles, in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// Latencies from 1µs to ten minutes, to 3 significant digits: a surge
// far past capacity keeps its last buyers waiting for more than a minute,
// counted from when each arrived.
const (
	minLatency = 1
	maxLatency = int64(10 * time.Minute / time.Microsecond)
	sigDigits  = 3
)

// Run sends the burst to sku. progress, if not nil, is called after every
// answer.
func (b Burst) Run(ctx context.Context, shop Shop, sku string, progress func(Answer)) (Stats, error) {
	if b.Buyers < 1 {
		return Stats{}, fmt.Errorf("loadtest: a burst needs at least 1 buyer, not %d", b.Buyers)
	}
	workers := b.Concurrency
	if workers <= 0 || workers > b.Buyers || b.Arrivals > 0 {
		workers = b.Buyers // a goroutine per buyer: none waits for another's answer
	}
	var at schedule
	if b.Arrivals > 0 {
		at.arrivals = make([]Arrival, b.Buyers)
		at.due = func(start time.Time, i int) time.Time {
			return start.Add(time.Duration(int64(b.Arrivals) * int64(i) / int64(b.Buyers)))
		}
	}
	return fire(ctx, shop, sku, b.Cart, b.Buyers, workers, at, progress)
}

// Run sends the steady load to sku.
func (s Steady) Run(ctx context.Context, shop Shop, sku string, progress func(Answer)) (Stats, error) {
	n := s.Buyers()
	if s.Rate <= 0 || n < 1 {
		return Stats{}, fmt.Errorf("loadtest: rate %g/s for %s sends no buyers", s.Rate, s.Duration)
	}
	workers := s.Concurrency
	if workers <= 0 {
		workers = 256
	}
	interval := time.Duration(float64(time.Second) / s.Rate)
	return fire(ctx, shop, sku, s.Cart, n, min(workers, n), schedule{due: func(start time.Time, i int) time.Time {
		return start.Add(time.Duration(i) * interval)
	}}, progress)
}

// tally is one worker's share of the stats.
type tally struct {
	counts  [len(outcomeNames)]int
	acked   []audit.Acked
	owners  map[int64]string
	soldOut map[string]int // by SKU named short
	busy    [][]string     // the SKUs of the orders answered busy
	err     string
	hist    *hdrhistogram.PackedHistogram // sparse: a worker may see few values
}

// schedule says when a load's buyers are sent: with due set, buyer i at
// due(start, i), its latency counting from then; with until set, none
// after it. With arrivals set, buyer i's arrival is kept in arrivals[i].
type schedule struct {
	due      func(start time.Time, i int) time.Time
	until    time.Time
	arrivals []Arrival
}

// fire sends n buyers through workers goroutines released together, or as
// many as it can until at.until, when at says. Each orders one unit of sku
// or, with cart 2 or more, a cart of the mix.
func fire(ctx context.Context, shop Shop, sku string, cart, n, workers int, at schedule, progress func(Answer)) (Stats, error) {
	if len(shop.URLs) == 0 {
		return Stats{}, fmt.Errorf("loadtest: no shop URLs")
	}
	if err := validCart(cart); err != nil {
		return Stats{}, fmt.Errorf("loadtest: %w", err)
	}
	client := newClient(workers)
	defer client.CloseIdleConnections()
	if at.arrivals != nil {
		warm(ctx, client, shop.URLs, workers)
	}
	run := rand.Text()[:8] // users are unique to this run
	cartOf := carts(sku, cart)
	stats := drive(workers, func(t *tally, start time.Time, i int) bool {
		if i >= n || ctx.Err() != nil || !at.until.IsZero() && time.Now().After(at.until) {
			return false
		}
		sent := time.Now()
		if at.due != nil {
			if sent = at.due(start, i); !sleepUntil(ctx, sent) {
				return false
			}
		}
		skus := cartOf(i)
		b, err := shop.buyer(run, i)
		out, id, short := Failed, int64(0), []string(nil)
		if err == nil {
			call := shop.History.Now()
			out, id, short, err = b.buy(ctx, client, skus)
			shop.recordOrder(shop.History.Client(), call, b, skus, out, id, short)
		}
		t.record(sent, out, err)
		t.told(b.user, skus, out, id, short)
		if at.arrivals != nil {
			at.arrivals[i] = Arrival{Rank: i + 1, Sent: sent.Sub(start), Answered: time.Since(start), Outcome: out}
		}
		if progress != nil {
			progress(Answer{Outcome: out, Latency: time.Since(sent)})
		}
		return true
	})
	if err := ctx.Err(); err != nil {
		return Stats{}, fmt.Errorf("loadtest: %w", err)
	}
	stats.Arrivals = at.arrivals
	return stats, nil
}

// drive releases workers goroutines at once through a start gate. Each
// calls job with its own tally and the next index, until job returns false.
func drive(workers int, job func(t *tally, start time.Time, i int) bool) Stats {
	var next atomic.Int64
	var start time.Time
	gate := make(chan struct{})
	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	for w := range tallies {
		t := &tallies[w]
		t.hist = hdrhistogram.NewPacked(minLatency, maxLatency, sigDigits)
		wg.Go(func() {
			<-gate
			for job(t, start, int(next.Add(1)-1)) {
			}
		})
	}
	start = time.Now()
	close(gate)
	wg.Wait()
	return merge(tallies, time.Since(start))
}

// Loop calls op from workers goroutines released together, over and over
// until d has passed or ctx ends, and reports its throughput and latency:
// Ordered counts the calls that returned nil, Errors the others. The bench
// loops its raw baselines with it.
func Loop(ctx context.Context, workers int, d time.Duration, op func(context.Context) error) Stats {
	deadline := time.Now().Add(d)
	return drive(workers, func(t *tally, _ time.Time, _ int) bool {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		sent := time.Now()
		err := op(ctx)
		out := Ordered
		if err != nil {
			out = Failed
		}
		t.record(sent, out, err)
		return true
	})
}

// record counts one answer that took from sent until now.
func (t *tally) record(sent time.Time, out Outcome, err error) {
	t.hist.RecordValue(min(time.Since(sent).Microseconds(), maxLatency))
	t.counts[out]++
	if err != nil && t.err == "" {
		t.err = err.Error()
	}
}

// told keeps what user's order of skus was answered: the order and its
// owner, if placed, the SKUs named short, if sold out, and the order's
// SKUs, if busy.
func (t *tally) told(user string, skus []string, out Outcome, id int64, short []string) {
	switch out {
	case Ordered:
		t.acked = append(t.acked, audit.Acked{ID: id, SKUs: skus})
		if t.owners == nil {
			t.owners = make(map[int64]string)
		}
		t.owners[id] = user
	case Busy:
		t.busy = append(t.busy, skus)
	case SoldOut:
		if t.soldOut == nil {
			t.soldOut = make(map[string]int)
		}
		for _, sku := range short {
			t.soldOut[sku]++
		}
	}
}

func merge(tallies []tally, elapsed time.Duration) Stats {
	s := Stats{Seconds: elapsed.Seconds()}
	hist := hdrhistogram.New(minLatency, maxLatency, sigDigits)
	var counts [len(outcomeNames)]int
	for _, t := range tallies {
		for o, c := range t.counts {
			counts[o] += c
		}
		s.Acked, s.BusyOrders = append(s.Acked, t.acked...), append(s.BusyOrders, t.busy...)
		for id, user := range t.owners {
			if s.Owners == nil {
				s.Owners = make(map[int64]string)
			}
			s.Owners[id] = user
		}
		for sku, n := range t.soldOut {
			if s.SoldOutSKUs == nil {
				s.SoldOutSKUs = make(map[string]int)
			}
			s.SoldOutSKUs[sku] += n
		}
		if s.FirstError == "" {
			s.FirstError = t.err
		}
		t.hist.MergeInto(hist)
	}
	s.Ordered, s.SoldOut, s.LimitReached, s.Busy, s.Errors = counts[Ordered], counts[SoldOut], counts[LimitReached], counts[Busy], counts[Failed]
	s.Requests = int(hist.TotalCount())
	if elapsed > 0 {
		s.Throughput = float64(s.Requests) / elapsed.Seconds()
	}
	ms := func(q float64) float64 { return float64(hist.ValueAtPercentile(q)) / 1000 }
	s.Latency = Latency{P50: ms(50), P90: ms(90), P99: ms(99), P999: ms(99.9), Max: float64(hist.Max()) / 1000}
	return s
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// warm opens a connection to each shop for each of n buyers, before a
// burst whose buyers arrive in order: a buyer that had to open its own
// would reach its shop after the dial and the accept, behind later buyers
// whose connections were open, and the figures would measure the
// handshakes' order rather than the shop's.
func warm(ctx context.Context, client *http.Client, urls []string, n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, urls[i%len(urls)]+"/healthz", nil)
			if err != nil {
				return
			}
			if resp, err := client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}
