package loadtest

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stockguard/shop/internal/audit"
)

// bench reports whether the report is a bench's, with baselines or the
// shops' usage, whose burst table has their columns.
func (r *Report) bench() bool {
	return slices.ContainsFunc(r.Results, func(r Result) bool { return r.Baseline != "" || len(r.Usage) > 0 })
}

// checked reports whether any burst's history was checked.
func checked(results []Result) bool {
	return slices.ContainsFunc(results, func(r Result) bool { return r.Burst != nil && r.Burst.History != nil })
}

// Checked reports whether the report's bursts had their histories checked.
func (r *Report) Checked() bool { return checked(r.Results) }

// Linear is the verdict on a burst's history in a word.
func (p *Phase) Linear() string {
	switch h := p.History; {
	case h == nil:
		return "-"
	case h.Linearizable:
		return "yes"
	case h.Unknown:
		return "unknown"
	}
	return "NO"
}

func writeBursts(w io.Writer, results []Result, bench bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "strategy\tinst\torders\toversold\tundersold\tstock left\treq/s\t"
	if bench {
		head += "of echo\tof baseline\tbaseline\t"
	}
	head += "p50 ms\tp99 ms\tbusy\terrors\t"
	if checked(results) {
		head += "linear\t"
	}
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
			if checked(results) {
				row += b.Linear() + "\t"
			}
		} else {
			row += strings.Repeat("-\t", 9)
			if checked(results) {
				row += "-\t"
			}
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

// writeCarts writes the abandoned-cart sales: the payments refused as
// late, their peak of units held, and at the end the units paid, expired
// and resold, and when the last unit was paid.
func writeCarts(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, leftAlign("strategy", results)+"\tabandoned\tpaid late\theld peak\tpaid\texpired\tresold\tall paid s\trequests\tverdict\t")
	for _, r := range results {
		if r.Burst == nil || r.Burst.Carts == nil {
			continue
		}
		c := r.Burst.Carts
		allPaid := "never"
		if c.AllPaid > 0 {
			allPaid = fmt.Sprintf("%.1f", c.AllPaid)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t\n", leftAlign(r.Strategy, results), c.Abandoned, c.Late, c.HeldPeak,
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
	head := "\tof echo\tof baseline\tbaseline\tverdict"
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
	fmt.Fprintln(tw, "baseline\tworkers\tops/s\tp50 ms\tp99 ms\terrors\t  one operation")
	for _, b := range baselines {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%d\t  %s\n", b.Key, b.Workers, b.Throughput, b.Latency.P50, b.Latency.P99, b.Errors, b.Name)
	}
	tw.Flush()
}

// writeFairness writes whom each strategy's burst served, where its
// buyers arrived in order.
func writeFairness(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, leftAlign("strategy", results)+"\twinners\tfirst come\tovertakes/1000\tmax gap ms\tlatest winner\tlongest wait ms\tat rank\t")
	for _, r := range results {
		if f := r.Fairness; f != nil {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.0f\t%d\t%.0f\t%d\t\n", leftAlign(r.Strategy, results), f.Winners, f.FirstComeShare,
				f.OvertakesPer1000, f.MaxOvertakeGapMS, f.LatestWinnerRank, f.LongestWaitMS, f.LongestWaitRank)
		}
	}
	tw.Flush()
}

// arrivalRate says how a burst's buyers arrived: "2000 buyers over 250ms,
// 8000 a second".
func arrivalRate(b Burst) string {
	return fmt.Sprintf("%d buyers over %s, %.0f a second", b.Buyers, b.Arrivals, float64(b.Buyers)/b.Arrivals.Seconds())
}

// overtakeGap is the gap a burst counts overtakes at.
func overtakeGap(b Burst) time.Duration {
	if b.OvertakeGap <= 0 {
		return DefaultOvertakeGap
	}
	return b.OvertakeGap
}
