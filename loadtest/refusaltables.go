package loadtest

// The tables of the loads that are mostly refusals: the refusal loops on
// a sold-out SKU, and the surges.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// refused reports whether any strategy ran a refusal loop.
func refused(results []Result) bool {
	return slices.ContainsFunc(results, func(r Result) bool { return r.Refusals != nil })
}

// refusalsPlan says what the refusal loops were, for a report.
func refusalsPlan(c Closed) string {
	return fmt.Sprintf("after each closed loop's search, a closed loop of its best step's buyers for %s on a sold-out SKU, every request a buyer and an Idempotency-Key of its own; "+
		"echo/s: http-echo's closed loop of the same buyers for as long, of echo: refusals/s over it; any answer but sold-out is an error; CPU in µs per refusal, measured as the CPU table's", c.Duration)
}

// writeRefusals writes each strategy's refusal loop.
func writeRefusals(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, leftAlign("strategy", results)+"\tbuyers\trefusals/s\techo/s\tof echo\tp50 ms\tp99 ms\terrors\tshops µs\tload µs\tmysql µs\tredis µs\ttotal µs\tverdict\t")
	for _, r := range results {
		if r.Refusals == nil || r.ClosedRefusals == nil {
			continue
		}
		p, c := r.Refusals, r.ClosedRefusals
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%.1f\t%.1f\t%d\t%s\t%s\n", leftAlign(r.Strategy, results), r.ClosedBuyers, c.PerSecond,
			rate(c.Echo()), percentOf(c.OfEcho), p.Latency.P50, p.Latency.P99, p.Requests-p.SoldOut, strings.Join(refusalCPU(c.CPU), "\t"), r.Verdict()+"\t")
	}
	tw.Flush()
}

// refusalCPU is the cells of a refusal's CPU: shops, load, mysql, redis
// and total, or dashes where it was not measured.
func refusalCPU(c *RefusalCPU) []string {
	if c == nil {
		return []string{"-", "-", "-", "-", "-"}
	}
	cells := make([]string, 5)
	for i, v := range []float64{c.Shops, c.Load, c.MySQL, c.Redis, c.Total} {
		cells[i] = fmt.Sprintf("%.1f", v)
	}
	return cells
}

// rate is a rate per second, or "-" for none.
func rate(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", f)
}

// percentOf is percent of a figure that may not have been measured.
func percentOf(f *float64) string {
	if f == nil {
		return "-"
	}
	return percent(*f)
}

// writeSurge writes each strategy's surge: its answers and their
// outcomes, the sale's audit, and what the surge cost the load generator
// and the database.
func writeSurge(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "\tanswers\tanswers/s\tp50 ms\tp99 ms\tmax ms\tordered\tsold out\tbusy\t5xx\tother\ttimeouts\tclient errors\tsold\tstock left\toversold\tundersold\tin flight peak\tcap waits\tsend lag ms\tmysql before\tmysql peak\taudit after s\t"
	if surgeChecked(results) {
		head += "linear\t"
	}
	fmt.Fprintln(tw, leftAlign("strategy", results)+head+"verdict\t")
	for _, r := range results {
		s := r.Surge
		if s == nil {
			continue
		}
		o, a := s.Outcomes, s.Audit
		row := fmt.Sprintf("%s\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t%.1f\t", leftAlign(r.Strategy, results),
			o.Total(), s.AnswersPerSecond, s.Latency.P50, s.Latency.P99, s.Latency.Max, o.Ordered, o.SoldOut, o.Busy, o.ServerErrors, o.OtherStatus+o.LimitReached, o.Timeouts, o.ClientErrors,
			a.Sold, a.Available, a.Oversold, a.Undersold, s.InFlightPeak, s.CapWaits, s.SendLagMax, strings.Join(s.Connections(), "\t"), s.AuditAfter/1000)
		if surgeChecked(results) {
			row += s.Linear() + "\t"
		}
		fmt.Fprintln(tw, row+r.Verdict()+"\t")
	}
	tw.Flush()
	for _, r := range results {
		if s := r.Surge; s != nil && len(s.Outcomes.errors()) > 0 {
			fmt.Fprintf(w, "  %s: the errors by status and problem type: %s\n", r.Strategy, strings.Join(s.Outcomes.errors(), ", "))
		}
	}
	for _, r := range results {
		if s := r.Surge; s != nil && s.CapWaits > 0 {
			fmt.Fprintf(w, "  %s: the cap of %d requests in flight was hit: %d arrivals waited for a slot, up to %.1f ms\n", r.Strategy, s.InFlightCap, s.CapWaits, s.CapWaitMax)
		}
	}
	if c := surgeConnections(results); c != nil {
		fmt.Fprintf(w, "  mysql before, peak: %s\n", c.Source)
	}
}

// surgeConnections is the first surge's reading of the database's
// connections, whose source the report names once, or nil.
func surgeConnections(results []Result) *Connections {
	for _, r := range results {
		if r.Surge != nil && r.Surge.MySQLConnections != nil {
			return r.Surge.MySQLConnections
		}
	}
	return nil
}

func (r *Report) surgeConnections() *Connections { return surgeConnections(r.Results) }

// surgeChecked reports whether any surge's history was checked.
func surgeChecked(results []Result) bool {
	return slices.ContainsFunc(results, func(r Result) bool { return r.Surge != nil && r.Surge.History != nil })
}

// Connections is the database's connections before the surge and at its
// peak, as cells, or dashes where they were not read.
func (s *SurgeResult) Connections() []string {
	if c := s.MySQLConnections; c != nil {
		return []string{fmt.Sprint(c.Before), fmt.Sprint(c.Peak)}
	}
	return []string{"-", "-"}
}
