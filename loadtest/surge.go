package loadtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Surge is an open loop past capacity, the opening second of a flash sale:
// Rate arrivals a second for Duration, each a buyer of its own with an
// Idempotency-Key of its own, each sent at its time whatever the answers
// before it, on a SKU with stock for a tenth of them. A closed loop slows
// down with the shop it measures; a surge does not, and shows what the
// shop answers when more buyers come than it can serve: how long the
// answers take, which answers they are, and whether the sale still holds.
type Surge struct {
	Rate     float64       `json:"rate"` // arrivals per second; 0: no surge
	Duration time.Duration `json:"duration_ns"`
	// Stock is the units on sale; 0 puts a tenth of the arrivals on sale.
	Stock int `json:"stock,omitempty"`
	// MaxInFlight caps the requests in flight, each of which holds a
	// connection and a file descriptor of the load generator; an arrival
	// that finds the cap reached waits for a slot, late, and the surge
	// reports it (SurgeStats.CapWaits). 0 means DefaultSurgeInFlight.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// Timeout is how long an arrival waits for its answer's headers before
	// it counts as a timeout. 0 means DefaultSurgeTimeout.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
}

// The defaults of a surge's cap on requests in flight and of its timeout:
// the cap stays below the file descriptors a process gets on a default
// Linux (a hard limit of 20,000 here, of 1,048,576 on many systems), and
// the timeout outlasts the shop's own request deadline
// (SHOP_REQUEST_TIMEOUT, 10 s by default), so that a slow answer shows as
// the shop's and not as the load generator's.
const (
	DefaultSurgeInFlight = 10_000
	DefaultSurgeTimeout  = 30 * time.Second
)

// Arrivals is how many buyers the surge sends.
func (s Surge) Arrivals() int { return int(s.Rate * s.Duration.Seconds()) }

// Units is the stock the surge's SKU gets: Stock, or a tenth of the
// arrivals.
func (s Surge) Units() int {
	if s.Stock > 0 {
		return s.Stock
	}
	return s.Arrivals() / 10
}

func (s Surge) inFlight() int {
	if s.MaxInFlight > 0 {
		return s.MaxInFlight
	}
	return DefaultSurgeInFlight
}

func (s Surge) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultSurgeTimeout
}

// validate reports a surge that cannot run: one that sends no buyer, or
// has no stock to sell or more stock than buyers, with which nothing sells
// out. A surge with no Rate is none, and valid.
func (s Surge) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case s.Rate < 0 || s.Duration < 0 || s.Stock < 0 || s.MaxInFlight < 0 || s.Timeout < 0:
		bad("the surge's rate, duration, stock, cap in flight and timeout must not be negative")
	case s.Rate == 0:
	case s.Arrivals() < 1:
		bad("a surge of %g/s for %s sends no buyers: set a longer --surge-for", s.Rate, s.Duration)
	case s.Units() < 1:
		bad("a surge of %d buyers has no stock: a tenth of them is less than a unit; send more, or set --surge-stock", s.Arrivals())
	case s.Units() > s.Arrivals():
		bad("a surge's stock (%d) must not pass its buyers (%d): nothing would sell out", s.Units(), s.Arrivals())
	}
	return errors.Join(errs...)
}

// describe says what the surge sends, for a report.
func (s Surge) describe() string {
	return fmt.Sprintf("%g arrivals/s for %s (%d buyers, each its own Idempotency-Key), %d units; each sent at its time whatever the answers before it, latency from when it was due; at most %d in flight, %s to answer",
		s.Rate, s.Duration, s.Arrivals(), s.Units(), s.inFlight(), s.timeout())
}

// SurgeStats is what a surge measured beyond the Stats of any load.
type SurgeStats struct {
	Arrivals int `json:"arrivals"`
	Stock    int `json:"stock"`
	// AnswersPerSecond is the answers over the seconds from the first
	// arrival to the last answer.
	AnswersPerSecond float64  `json:"answers_per_s"`
	Outcomes         Outcomes `json:"outcomes"`
	// InFlightPeak is the most requests in flight at once; InFlightCap the
	// cap on them. CapWaits counts the arrivals that found the cap reached
	// and waited for a slot, CapWaitMax the longest wait: a surge that hit
	// its cap was not an open loop for those arrivals (their latency still
	// counts from when each was due).
	InFlightPeak int     `json:"in_flight_peak"`
	InFlightCap  int     `json:"in_flight_cap"`
	CapWaits     int     `json:"cap_waits"`
	CapWaitMax   float64 `json:"cap_wait_max_ms"`
	// SendLagMax is the latest the load generator sent an arrival after
	// its time, in milliseconds, cap waits included: how well it kept up.
	SendLagMax float64 `json:"send_lag_max_ms"`
	// AuditAfter is how long after its last answer the surge's sale was
	// audited, in milliseconds: once its stock and orders in the database
	// had stopped changing.
	AuditAfter float64 `json:"audit_after_ms"`
	// MySQLConnections is what the database server saw during the surge,
	// where it was read.
	MySQLConnections *Connections `json:"mysql_connections,omitempty"`
}

// Outcomes counts a surge's answers by status and problem type. Every
// arrival has exactly one.
type Outcomes struct {
	Ordered      int `json:"ordered"`       // 201
	SoldOut      int `json:"sold_out"`      // 409 sold-out
	LimitReached int `json:"limit_reached"` // 409 limit-reached
	Busy         int `json:"busy"`          // 503
	ServerErrors int `json:"server_errors"` // any other 5xx
	OtherStatus  int `json:"other_status"`  // any other answer: a 4xx, a 409 of another type, a 201 without an order
	Timeouts     int `json:"timeouts"`      // no answer in time
	ClientErrors int `json:"client_errors"` // no answer: the connection failed
	// ByStatus counts the same answers by status and problem type, such as
	// "409 sold-out", "500 internal" or "timeout", and the connections that
	// failed by how: "client error: closed with no answer" (the server
	// closed it), ": reset", ": refused", or "client error" alone.
	ByStatus map[string]int `json:"by_status"`
}

// Total is every answer counted.
func (o Outcomes) Total() int {
	return o.Ordered + o.SoldOut + o.LimitReached + o.Busy + o.ServerErrors + o.OtherStatus + o.Timeouts + o.ClientErrors
}

// errors lists the answers counted as errors, by status and problem type
// with their counts, most first: all but 201, sold-out, limit-reached and
// 503.
func (o Outcomes) errors() []string {
	var keys []string
	for k := range o.ByStatus {
		if !slices.Contains([]string{"201", "409 sold-out", "409 limit-reached", "503"}, k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(o.ByStatus[b]-o.ByStatus[a], strings.Compare(a, b)) })
	for i, k := range keys {
		keys[i] = fmt.Sprintf("%d %s", o.ByStatus[k], k)
	}
	return keys
}

// count adds one answer, as its outcome and error say.
func (o *Outcomes) count(out Outcome, err error) {
	key := ""
	switch out {
	case Ordered:
		o.Ordered, key = o.Ordered+1, "201"
	case SoldOut:
		o.SoldOut, key = o.SoldOut+1, "409 sold-out"
	case LimitReached:
		o.LimitReached, key = o.LimitReached+1, "409 limit-reached"
	case Busy:
		o.Busy, key = o.Busy+1, "503"
	default:
		var answered *answerError
		var netErr net.Error
		switch {
		case errors.As(err, &answered):
			key = strconv.Itoa(answered.status)
			if answered.problem != "" {
				key += " " + answered.problem
			}
			if answered.status >= 500 {
				o.ServerErrors++
			} else {
				o.OtherStatus++
			}
		case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
			o.Timeouts, key = o.Timeouts+1, "timeout"
		default:
			o.ClientErrors, key = o.ClientErrors+1, "client error"
			switch {
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				key += ": closed with no answer"
			case errors.Is(err, syscall.ECONNRESET):
				key += ": reset"
			case errors.Is(err, syscall.ECONNREFUSED):
				key += ": refused"
			}
		}
	}
	if o.ByStatus == nil {
		o.ByStatus = make(map[string]int)
	}
	o.ByStatus[key]++
}

// Connections is how many connections a server had open during a load:
// Before it, and at the Peak of its Samples.
type Connections struct {
	Before  int    `json:"before"`
	Peak    int    `json:"peak"`
	Samples int    `json:"samples"`
	Source  string `json:"source"` // what was read, how often, and what it counts
}

// Run sends the surge to sku. Each arrival has a goroutine of its own,
// started at its time, so that no answer delays another arrival; only the
// cap on requests in flight can, and the stats say when it did.
func (s Surge) Run(ctx context.Context, shop Shop, sku string, progress func(Answer)) (Stats, error) {
	n := s.Arrivals()
	if s.Rate <= 0 || n < 1 {
		return Stats{}, fmt.Errorf("loadtest: a surge of %g/s for %s sends no buyers", s.Rate, s.Duration)
	}
	if len(shop.URLs) == 0 {
		return Stats{}, fmt.Errorf("loadtest: no shop URLs")
	}
	capacity := s.inFlight()
	client := newClient(capacity)
	client.Transport.(*http.Transport).ResponseHeaderTimeout = s.timeout()
	defer client.CloseIdleConnections()
	run := rand.Text()[:8] // users are unique to this run
	skus := []string{sku}
	slots := make(chan struct{}, capacity)
	interval := float64(time.Second) / s.Rate
	var (
		mu       sync.Mutex
		t        = tally{hist: hdrhistogram.NewPacked(minLatency, maxLatency, sigDigits)}
		outcomes Outcomes
		inFlight atomic.Int64
		wg       sync.WaitGroup
	)
	st := SurgeStats{Arrivals: n, Stock: s.Units(), InFlightCap: capacity}
	var lag, capWait time.Duration
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(float64(i) * interval))
		if !sleepUntil(ctx, due) {
			break
		}
		select {
		case slots <- struct{}{}:
		default:
			st.CapWaits++
			waited := time.Now()
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
			}
			capWait = max(capWait, time.Since(waited))
		}
		if ctx.Err() != nil {
			break
		}
		lag = max(lag, time.Since(due))
		if now := int(inFlight.Add(1)); now > st.InFlightPeak {
			st.InFlightPeak = now
		}
		wg.Go(func() {
			defer func() { inFlight.Add(-1); <-slots }()
			b, err := shop.buyer(run, i)
			out, id, short := Failed, int64(0), []string(nil)
			if err == nil {
				call := shop.History.Now()
				out, id, short, err = b.buy(ctx, client, skus)
				shop.recordOrder(shop.History.Client(), call, b, skus, out, id, short)
			}
			mu.Lock()
			t.record(due, out, err)
			t.told(b.user, skus, out, id, short)
			outcomes.count(out, err)
			mu.Unlock()
			if progress != nil {
				progress(Answer{Outcome: out, Latency: time.Since(due)})
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Stats{}, fmt.Errorf("loadtest: %w", err)
	}
	stats := merge([]tally{t}, time.Since(start))
	st.AnswersPerSecond, st.Outcomes = stats.Throughput, outcomes
	st.CapWaitMax, st.SendLagMax = ms(capWait), ms(lag)
	stats.Surge = &st
	return stats, nil
}
