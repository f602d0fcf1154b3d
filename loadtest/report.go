package loadtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/lincheck"
)

// Report is everything one demo or bench run measured.
type Report struct {
	Kind      string           `json:"kind"`              // "demo" or "bench"
	Command   string           `json:"command,omitempty"` // how it was run
	Started   time.Time        `json:"started"`
	Seconds   float64          `json:"seconds"`
	Machine   Machine          `json:"machine"`
	Backends  []Backend        `json:"backends"`
	Plan      Plan             `json:"plan"`
	Baselines []BaselineResult `json:"baselines,omitempty"`
	Results   []Result         `json:"results"`
}

// Machine is where the run happened.
type Machine struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
	CPUs int    `json:"cpus"`
	CPU  string `json:"cpu,omitempty"` // model name, where known
	Go   string `json:"go"`
}

// Backend says what served one role, e.g. the database.
type Backend struct {
	Role string `json:"role"`
	What string `json:"what"`
}

// Result is one strategy's run.
type Result struct {
	Strategy  string `json:"strategy"`
	Instances int    `json:"instances"`
	// Note says how the strategy runs here when that differs from its
	// design, such as pessimistic on SQLite.
	Note    string `json:"note,omitempty"`
	Skipped string `json:"skipped,omitempty"` // why it did not run
	Error   string `json:"error,omitempty"`   // why it did not finish
	Burst   *Phase `json:"burst,omitempty"`
	Steady  *Phase `json:"steady,omitempty"`
	Closed  *Phase `json:"closed,omitempty"`
	// ClosedBuyers is how many buyers looped in Closed, the best step of
	// the closed loop's search, and ClosedSteps every step it ran.
	ClosedBuyers int          `json:"closed_buyers,omitempty"`
	ClosedSteps  []ClosedStep `json:"closed_steps,omitempty"`
	// ClosedCart, with a cart mix (Plan.Closed.Cart), is the cart mix's
	// closed loop, run on the same fleet after Closed, which then places
	// single orders; its search's best step and steps as Closed's, and
	// ClosedCartFraction its orders/s over Closed's.
	ClosedCart         *Phase       `json:"closed_cart,omitempty"`
	ClosedCartBuyers   int          `json:"closed_cart_buyers,omitempty"`
	ClosedCartSteps    []ClosedStep `json:"closed_cart_steps,omitempty"`
	ClosedCartFraction float64      `json:"closed_cart_fraction_of_single,omitempty"`
	// Refusals, with Closed, is a closed loop of as many buyers as Closed's
	// on a sold-out SKU, for as long, every request a buyer and an
	// Idempotency-Key of its own, run on the same fleet after Closed's
	// search; ClosedRefusals is its figures: what a shop does with
	// requests it must refuse, as most of a flash sale's are.
	Refusals       *Phase    `json:"refusals,omitempty"`
	ClosedRefusals *Refusals `json:"closed_refusals,omitempty"`
	// Surge, with Plan.Surge, is the open loop past capacity, on the same
	// fleet after every other load.
	Surge *SurgeResult `json:"surge,omitempty"`
	Usage []Usage      `json:"usage,omitempty"` // per instance
	// Fairness, when the burst's buyers arrived in order, says whether
	// they were served in that order.
	Fairness *Fairness `json:"fairness,omitempty"`
	// Baseline names the baseline that bounds this strategy's throughput:
	// the raw loop of the path it takes. Fraction is the burst's answers
	// per second over the baseline's, ClosedFraction the closed loop's
	// orders per second over it.
	Baseline       string  `json:"baseline,omitempty"`
	Fraction       float64 `json:"fraction_of_baseline,omitempty"`
	ClosedFraction float64 `json:"closed_fraction_of_baseline,omitempty"`
	// EchoFraction and ClosedEchoFraction are the same over what the shop's
	// HTTP stack alone answers (http-echo-burst, http-echo): the most any
	// strategy can do over HTTP.
	EchoFraction       float64 `json:"fraction_of_http_echo,omitempty"`
	ClosedEchoFraction float64 `json:"closed_fraction_of_http_echo,omitempty"`
	// ClosedCPUOfEcho is the CPU per order of the closed loop's best step
	// over http-echo's per request.
	ClosedCPUOfEcho float64 `json:"closed_cpu_of_http_echo,omitempty"`
}

// OrdersPerSecond is the orders the database holds after the phase over the
// phase's seconds.
func (p *Phase) OrdersPerSecond() float64 {
	if p == nil || p.Seconds <= 0 {
		return 0
	}
	return float64(p.Audit.Orders) / p.Seconds
}

// Phase is one load and its audit.
type Phase struct {
	Stats
	// Audit is what the database says of the load's SKU or, with a cart
	// mix, of its SKUs together; SKUs is then each SKU's audit.
	Audit audit.Audit   `json:"audit"`
	SKUs  []audit.Audit `json:"skus,omitempty"`
	// API is the audit through the shop's API (Shop.Audit) beside the
	// database's, where a load read both: `shop load --mysql`'s. Without
	// the database, `shop load`'s Audit is the API's.
	API *audit.Audit `json:"api_audit,omitempty"`
	// Problems lists the broken invariants, the failed requests, and
	// buyers sent away busy while stock was left; any makes the verdict
	// FAIL.
	Problems []string `json:"problems,omitempty"`
	// History is the verdict on the load's history, where it was checked:
	// the burst's, with --check or --history.
	History *lincheck.Result `json:"history,omitempty"`
	// CPU is what each class of process used during the load, where it
	// was measured: the bench's loads. The tables show the closed loop's.
	CPU []ClassCPU `json:"cpu,omitempty"`
}

// Verdict is PASS, FAIL or SKIP.
func (r Result) Verdict() string {
	switch {
	case r.Skipped != "":
		return "SKIP"
	case r.Error != "", r.Burst == nil:
		return "FAIL"
	}
	for _, l := range r.loads() {
		if len(l.p.Problems) > 0 {
			return "FAIL"
		}
	}
	return "PASS"
}

// load is one of a result's loads, by name.
type load struct {
	name string
	p    *Phase
}

// loads returns the result's loads that ran, in order.
func (r Result) loads() []load {
	var ls []load
	var surge *Phase
	if r.Surge != nil {
		surge = &r.Surge.Phase
	}
	for _, l := range []load{{"burst", r.Burst}, {"steady", r.Steady}, {"closed", r.Closed}, {"carts", r.ClosedCart}, {"refusals", r.Refusals}, {"surge", surge}} {
		if l.p != nil {
			ls = append(ls, l)
		}
	}
	return ls
}

// Refusals is what a closed loop of refusals sustained, in exactly the
// shape the JSON gives it: the sold-out answers per second; their rate
// over http-echo's in a closed loop of the same buyers for as long, the
// most the HTTP stack alone answers (null where the run measured no
// http-echo); and the CPU per refusal, by class of process, as the CPU
// table measures a closed loop's per order (null where the run measured
// none). Answers other than sold-out are the loop's errors, in its Phase.
type Refusals struct {
	PerSecond float64     `json:"refusals_per_s"`
	OfEcho    *float64    `json:"of_echo"`
	CPU       *RefusalCPU `json:"cpu_us"`
}

// RefusalCPU is the CPU per refusal, in microseconds: the shops', the load
// generator's, MySQL's, Redis's (every Redis class together: a cluster's
// nodes, or the Sentinels), and the total of every class measured, lock
// servers included.
type RefusalCPU struct {
	Shops float64 `json:"shops"`
	Load  float64 `json:"load"`
	MySQL float64 `json:"mysql"`
	Redis float64 `json:"redis"`
	Total float64 `json:"total"`
}

// NewRefusals returns the figures of a refusal loop, p, whose CPU is per
// refusal (PerUnit), with echo the rate of http-echo's loop of the same
// buyers for as long, or 0 where none was measured.
func NewRefusals(p *Phase, echo float64) *Refusals {
	r := &Refusals{}
	if p.Seconds > 0 {
		r.PerSecond = float64(p.SoldOut) / p.Seconds
	}
	if echo > 0 {
		of := r.PerSecond / echo
		r.OfEcho = &of
	}
	if len(p.CPU) > 0 {
		c := &RefusalCPU{Total: CPUPerOrder(p.CPU)}
		for _, class := range p.CPU {
			switch {
			case class.Class == "shops":
				c.Shops = class.PerOrder
			case class.Class == "load generator":
				c.Load = class.PerOrder
			case class.Class == "mysql":
				c.MySQL = class.PerOrder
			case class.Class == "redis" || strings.HasPrefix(class.Class, "redis "):
				c.Redis += class.PerOrder
			}
		}
		r.CPU = c
	}
	return r
}

// Echo is the rate of the http-echo loop that the refusals were compared
// with, or 0 where none was.
func (r *Refusals) Echo() float64 {
	if r == nil || r.OfEcho == nil || *r.OfEcho == 0 {
		return 0
	}
	return r.PerSecond / *r.OfEcho
}

// SurgeResult is one strategy's surge: the load and its audit, and what
// only a surge measures.
type SurgeResult struct {
	Phase
	SurgeStats
}

// Usage is what one shop process used over its life.
type Usage struct {
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	CPUSeconds   float64 `json:"cpu_seconds"` // user + system
}

// BaselineResult is one raw loop of the bench (see Loop).
type BaselineResult struct {
	Key     string `json:"key"`
	Name    string `json:"name"`
	Workers int    `json:"workers"`
	Stats          // Ordered counts the operations done, Errors the failed
	// CPU is what each class of process used per operation, where it was
	// measured: http-echo's best closed step.
	CPU []ClassCPU `json:"cpu,omitempty"`
	// Steps is every closed loop of http-echo, by buyers: its search's,
	// and those of the buyers of a refusal loop that the search did not
	// reach.
	Steps []ClosedStep `json:"steps,omitempty"`
}

// NewReport starts the report of a demo or bench run of p.
func NewReport(kind string, p Plan) *Report {
	return &Report{
		Kind:    kind,
		Started: time.Now().UTC(),
		Plan:    p,
		Machine: Machine{OS: osName(), Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), CPU: cpuModel(), Go: runtime.Version()},
	}
}

// Finish records how long the run took.
func (r *Report) Finish() { r.Seconds = time.Since(r.Started).Seconds() }

// osName is PRETTY_NAME from os-release where there is one, else GOOS.
func osName() string {
	if v := keyOf("/etc/os-release", "PRETTY_NAME="); v != "" {
		return strings.Trim(v, `"`)
	}
	return runtime.GOOS
}

func cpuModel() string {
	_, v, _ := strings.Cut(keyOf("/proc/cpuinfo", "model name"), ":")
	return strings.TrimSpace(v)
}

// keyOf returns the rest of the first line of file that starts with prefix.
func keyOf(file, prefix string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return v
		}
	}
	return ""
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as plain-text tables.
func (r *Report) WriteText(w io.Writer) error {
	p := r.Plan
	if p.Burst.Cart >= 2 {
		fmt.Fprintf(w, "%s: %d units of each of %d SKUs, %d buyers, each ordering a cart of %s of them", r.Kind, p.Stock, len(HotSKUs("", p.Burst.Cart)), p.Burst.Buyers, cartLines(p.Burst.Cart))
	} else {
		fmt.Fprintf(w, "%s: %d units, %d buyers", r.Kind, p.Stock, p.Burst.Buyers)
	}
	if p.Burst.Concurrency > 0 {
		fmt.Fprintf(w, " (%d in flight)", p.Burst.Concurrency)
	}
	if p.Burst.Arrivals > 0 {
		fmt.Fprintf(w, " arriving one by one over %s", p.Burst.Arrivals)
	}
	fmt.Fprintf(w, ", %d shop instance(s) per strategy\n", p.Instances)
	fmt.Fprintf(w, "machine: %s, %s/%s, %d CPUs %s, %s\n", r.Machine.OS, runtime.GOOS, r.Machine.Arch, r.Machine.CPUs, r.Machine.CPU, r.Machine.Go)
	for _, b := range r.Backends {
		fmt.Fprintf(w, "%s: %s\n", b.Role, b.What)
	}
	fmt.Fprintln(w)
	if len(r.Baselines) > 0 {
		writeBaselines(w, r.Baselines)
		fmt.Fprintln(w)
	}
	writeBursts(w, r.Results, r.bench())
	if p.Burst.Arrivals > 0 {
		fmt.Fprintf(w, "\nfairness: %s; first come: the share of the winners among as many first arrivals; an overtake: a buyer refused while one who arrived at least %s later won\n",
			arrivalRate(p.Burst), overtakeGap(p.Burst))
		writeFairness(w, r.Results)
	}
	if p.PaymentWindow > 0 {
		fmt.Fprintf(w, "\nabandoned carts: %s to pay; %s of the first %d winners never pay, later winners buy what comes back and pay; units from the database\n",
			p.PaymentWindow, percent(p.Unpaid), p.Stock)
		writeCarts(w, r.Results)
	}
	if p.Steady.Rate > 0 {
		fmt.Fprintf(w, "\nsteady: %g buyers/s for %s, stock for every buyer, latency from when each request was due\n", p.Steady.Rate, p.Steady.Duration)
		writeSteady(w, r.Results)
	}
	if p.Closed.Duration > 0 {
		fmt.Fprintf(w, "\nthroughput: %s, stock for every buyer; orders/s from the database\n", p.Closed.describe())
		writeClosed(w, r.Results, false)
		if p.Closed.Cart >= 2 {
			fmt.Fprintf(w, "\nthroughput of carts: the same loops, each order a cart of %s SKUs; of single: orders/s over the single orders' above\n", cartLines(p.Closed.Cart))
			writeClosed(w, r.Results, true)
		}
	}
	if refused(r.Results) {
		fmt.Fprintf(w, "\nrefusals: %s\n", refusalsPlan(p.Closed))
		writeRefusals(w, r.Results)
	}
	if p.Surge.Rate > 0 {
		fmt.Fprintf(w, "\nsurge: %s\n", p.Surge.describe())
		writeSurge(w, r.Results)
	}
	if rows := r.skuRows(); len(rows) > 0 {
		fmt.Fprintf(w, "\ncarts: each order one unit of each of %s SKUs, in random order, all or nothing; each SKU from the database, its audit FAIL if it broke an invariant; sold out counts the answers that named it short\n", cartLines(p.Burst.Cart))
		writeSKUs(w, rows, r.Results)
	}
	writeAPI(w, r.Results)
	if rows := r.cpuRows(); len(rows) > 0 {
		writeCPU(w, rows)
	}
	if problems := r.Problems(); len(problems) > 0 {
		fmt.Fprintln(w, "\nwhy FAIL (from the database audit and the answers):")
		for _, pr := range problems {
			fmt.Fprintln(w, "  "+pr)
		}
	}
	fmt.Fprintf(w, "\ntook %.1fs\n", r.Seconds)
	return nil
}

// Problems lists why each strategy that failed failed, by name: the
// problems of its loads, and the error that stopped it.
func (r *Report) Problems() []string {
	var problems []string
	for _, res := range r.Results {
		for _, l := range res.loads() {
			for _, pr := range l.p.Problems {
				problems = append(problems, res.Strategy+": "+pr)
			}
		}
		if res.Error != "" {
			problems = append(problems, res.Strategy+": "+res.Error)
		}
	}
	return problems
}
