package loadtest

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stockguard/shop/internal/audit"
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
	Usage              []Usage      `json:"usage,omitempty"` // per instance
	// Baseline names the ceiling that bounds this strategy's throughput:
	// the raw loop of the path it takes. Fraction is the burst's answers
	// per second over the ceiling's, ClosedFraction the closed loop's
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
	for _, l := range []load{{"burst", r.Burst}, {"steady", r.Steady}, {"closed", r.Closed}, {"carts", r.ClosedCart}} {
		if l.p != nil {
			ls = append(ls, l)
		}
	}
	return ls
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
	writeBursts(w, r.Results)
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

func writeBursts(w io.Writer, results []Result) {
	bench := false
	for _, r := range results {
		bench = bench || r.Baseline != "" || len(r.Usage) > 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "strategy\tinst\torders\toversold\tundersold\tstock left\treq/s\t"
	if bench {
		head += "of echo\tof ceiling\tceiling\t"
	}
	head += "p50 ms\tp99 ms\tbusy\terrors\t"
	if bench {
		head += "RSS MB\tCPU s\t"
	}
	fmt.Fprintln(tw, leftAlign("strategy", results)+head[len("strategy"):]+"verdict\t  note")
	for _, r := range results {
		row := fmt.Sprintf("%s\t%d\t", leftAlign(r.Strategy, results), r.Instances)
		note := r.Note
		if b := r.Burst; b != nil {
			a := b.Audit
			row += fmt.Sprintf("%d\t%d\t%d\t%d\t%.0f\t", a.Orders, a.Oversold, a.Undersold, a.Available, b.Throughput)
			if bench {
				row += percent(r.EchoFraction) + "\t" + percent(r.Fraction) + "\t" + cmp.Or(r.Baseline, "-") + "\t"
			}
			row += fmt.Sprintf("%.1f\t%.1f\t%d\t%d\t", b.Latency.P50, b.Latency.P99, b.Busy, b.Errors)
		} else {
			row += strings.Repeat("-\t", 9)
			if bench {
				row += "-\t-\t-\t"
			}
			note = r.Skipped + r.Error
		}
		if bench {
			rss, cpu := totalUsage(r.Usage)
			row += fmt.Sprintf("%.0f\t%.1f\t", rss, cpu)
		}
		if note != "" {
			note = "  " + note
		}
		fmt.Fprintln(tw, row+r.Verdict()+"\t"+note)
	}
	tw.Flush()
}

// writeCarts writes the abandoned-cart sales: their peak of units held,
// and at the end the units paid, expired and resold, and when the last
// unit was paid.
func writeCarts(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, leftAlign("strategy", results)+"\tabandoned\theld peak\tpaid\texpired\tresold\tall paid s\trequests\tverdict\t")
	for _, r := range results {
		if r.Burst == nil || r.Burst.Carts == nil {
			continue
		}
		c := r.Burst.Carts
		allPaid := "never"
		if c.AllPaid > 0 {
			allPaid = fmt.Sprintf("%.1f", c.AllPaid)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t\n", leftAlign(r.Strategy, results), c.Abandoned, c.HeldPeak,
			c.Paid, c.Expired, c.Resold, allPaid, r.Burst.Requests, r.Verdict())
	}
	tw.Flush()
}

func writeSteady(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, leftAlign("strategy", results)+"\treq/s\torders\toversold\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tbusy\terrors\tverdict\t")
	for _, r := range results {
		if s := r.Steady; s != nil {
			fmt.Fprintf(tw, "%s\t%.0f\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%s\t\n", leftAlign(r.Strategy, results), s.Throughput, s.Audit.Orders,
				s.Audit.Oversold, s.Latency.P50, s.Latency.P90, s.Latency.P99, s.Latency.P999, s.Latency.Max, s.Busy, s.Errors, r.Verdict())
		}
	}
	tw.Flush()
}

// writeClosed writes each strategy's closed loop of single orders or, with
// carts, of the cart mix.
func writeClosed(w io.Writer, results []Result, carts bool) {
	head := "\tof echo\tof ceiling\tceiling\tverdict"
	if carts {
		head = "\tof single"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, leftAlign("strategy", results)+"\tbuyers\torders/s\torders\toversold\tp50 ms\tp99 ms\tbusy\terrors"+head+"\tsteps: buyers orders/s\t")
	for _, r := range results {
		c, buyers, all := r.Closed, r.ClosedBuyers, r.ClosedSteps
		tail := fmt.Sprintf("%s\t%s\t%s\t%s", percent(r.ClosedEchoFraction), percent(r.ClosedFraction), cmp.Or(r.Baseline, "-"), r.Verdict())
		if carts {
			c, buyers, all, tail = r.ClosedCart, r.ClosedCartBuyers, r.ClosedCartSteps, fmt.Sprintf("%.2f×", r.ClosedCartFraction)
		}
		if c != nil {
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%d\t%.1f\t%.1f\t%d\t%d\t%s\t%s\t\n", leftAlign(r.Strategy, results), buyers, c.OrdersPerSecond(), c.Audit.Orders,
				c.Audit.Oversold, c.Latency.P50, c.Latency.P99, c.Busy, c.Errors, tail, steps(all))
		}
	}
	tw.Flush()
}

// steps writes a closed loop's search: each step's buyers and orders/s.
func steps(all []ClosedStep) string {
	s := make([]string, len(all))
	for i, st := range all {
		s[i] = fmt.Sprintf("%d %.0f", st.Buyers, st.PerSecond)
	}
	return strings.Join(s, ", ")
}

// skuRow is one SKU of a load with a cart mix.
type skuRow struct {
	Strategy, Load string
	Audit          audit.Audit
	SoldOut        int    // sold-out answers that named it short
	Verdict        string // the SKU's audit's: FAIL if it broke an invariant
}

// skuRows returns the SKUs of every load that had a cart mix.
func (r *Report) skuRows() []skuRow {
	var rows []skuRow
	for _, res := range r.Results {
		for _, load := range res.loads() {
			for _, a := range load.p.SKUs {
				verdict := "PASS"
				if len(a.Violations()) > 0 {
					verdict = "FAIL"
				}
				rows = append(rows, skuRow{Strategy: res.Strategy, Load: load.name, Audit: a, SoldOut: load.p.SoldOutSKUs[a.SKU], Verdict: verdict})
			}
		}
	}
	return rows
}

// cartLines says how many lines a cart of the mix has: "2 to 5", or "2".
func cartLines(cart int) string {
	if cart == 2 {
		return "2"
	}
	return fmt.Sprintf("2 to %d", cart)
}

func writeSKUs(w io.Writer, rows []skuRow, results []Result) {
	width := len("sku")
	for _, r := range rows {
		width = max(width, len(r.Audit.SKU))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tload  \t%-*s\tstock\torders\tsold\toversold\tundersold\tstock left\tsold out\tpartial\tlines lost\taudit\t\n", leftAlign("strategy", results), width, "sku")
	for _, r := range rows {
		a := r.Audit
		fmt.Fprintf(tw, "%s\t%-6s\t%-*s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", leftAlign(r.Strategy, results), r.Load, width, a.SKU,
			a.Initial, a.Orders, a.Sold, a.Oversold, a.Undersold, a.Available, r.SoldOut, a.Partial, a.MissingLines, r.Verdict)
	}
	tw.Flush()
}

// writeAPI writes each load's audit through the API, where one was read
// beside the database's, and the database's figures.
func writeAPI(w io.Writer, results []Result) {
	var rows []string
	for _, r := range results {
		for _, load := range r.loads() {
			if load.p.API == nil {
				continue
			}
			a, db := load.p.API, load.p.Audit
			verdict := "PASS"
			if len(a.Violations()) > 0 {
				verdict = "FAIL"
			}
			rows = append(rows, fmt.Sprintf("%s\t%-6s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", leftAlign(r.Strategy, results), load.name,
				a.Initial, a.Available, a.Sold, a.Orders, a.Oversold, a.Undersold, a.LostAcks+a.MissingLines, db.Available, db.Sold, db.Orders, db.Oversold, verdict))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\naudit through the API: each SKU's stock (GET /api/v1/stock/{sku}) and each order answered 201 read as its buyer (GET /api/v1/orders/{id}), beside the database's (db), which the tables above show")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, leftAlign("strategy", results)+"\tload  \tinitial\tavailable\tsold\torders\toversold\tundersold\tacks lost\tdb available\tdb sold\tdb orders\tdb oversold\taudit\t")
	for _, row := range rows {
		fmt.Fprint(tw, row)
	}
	tw.Flush()
}

// totalUsage returns the largest peak RSS of the instances, in MiB, and
// their CPU time together, in seconds.
func totalUsage(us []Usage) (rssMB, cpu float64) {
	for _, u := range us {
		rssMB, cpu = max(rssMB, float64(u.PeakRSSBytes)/(1<<20)), cpu+u.CPUSeconds
	}
	return rssMB, cpu
}

// leftAlign pads name to the longest strategy name, so that it reads left
// aligned in a right-aligned table.
func leftAlign(name string, results []Result) string {
	width := len("strategy")
	for _, r := range results {
		width = max(width, len(r.Strategy))
	}
	return fmt.Sprintf("%-*s", width, name)
}

func percent(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

func writeBaselines(w io.Writer, baselines []BaselineResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ceiling\tworkers\tops/s\tp50 ms\tp99 ms\terrors\t  one operation")
	for _, b := range baselines {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%d\t  %s\n", b.Key, b.Workers, b.Throughput, b.Latency.P50, b.Latency.P99, b.Errors, b.Name)
	}
	tw.Flush()
}
