package loadtest

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var reportHTML string

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":          percent,
	"hotSKUs":      func(cart int) int { return len(HotSKUs("", cart)) },
	"cartLines":    cartLines,
	"arrivalRate":  arrivalRate,
	"overtakeGap":  overtakeGap,
	"steps":        steps,
	"closedPlan":   func(c Closed) string { return c.describe() },
	"refusalsPlan": refusalsPlan,
	"surgePlan":    func(s Surge) string { return s.describe() },
	"rate":         rate,
	"percentOf":    percentOf,
	"refusalCPU":   refusalCPU,
	"plus":         func(a, b int) int { return a + b },
	"minus":        func(a, b int) int { return a - b },
	"seconds":      func(ms float64) float64 { return ms / 1000 },
	"usage": func(us []Usage) template.HTML {
		rss, cpu := totalUsage(us)
		return template.HTML(fmt.Sprintf("<td>%.0f MB</td><td>%.1f</td>", rss, cpu))
	},
}).Parse(reportHTML))

// WriteHTML writes the report as one self-contained HTML page: the charts
// are inline SVG, the styles inline CSS, and nothing is fetched.
func (r *Report) WriteHTML(w io.Writer) error {
	return reportTemplate.Execute(w, struct {
		*Report
		Charts           []template.HTML
		CPU              cpuTable
		SKUs             []skuRow
		Bench, Refused   bool
		SurgeChecked     bool
		SurgeConnections *Connections
	}{r, r.charts(), newCPUTable(r.cpuRows()), r.skuRows(), r.bench(), refused(r.Results), surgeChecked(r.Results), r.surgeConnections()})
}

// charts draws the comparisons a reader looks for first.
func (r *Report) charts() []template.HTML {
	var ran []Result
	for _, res := range r.Results {
		if res.Burst != nil {
			ran = append(ran, res)
		}
	}
	series := func(f func(Result) float64, format string) []bar {
		bars := make([]bar, len(ran))
		for i, res := range ran {
			v := f(res)
			bars[i] = bar{label: res.Strategy, value: v, text: fmt.Sprintf(format, v), fail: res.Verdict() != "PASS"}
		}
		return bars
	}
	charts := []template.HTML{
		barChart("Burst throughput", "answers per second, higher is better", series(func(r Result) float64 { return r.Burst.Throughput }, "%.0f/s")),
		barChart("Burst latency, p99", "milliseconds, lower is better", series(func(r Result) float64 { return r.Burst.Latency.P99 }, "%.1f ms")),
		barChart("Oversold units", "sold beyond the stock, from the database: must be 0", series(func(r Result) float64 { return float64(r.Burst.Audit.Oversold) }, "%.0f")),
		barChart("Undersold units", "left over while buyers were told sold out: must be 0", series(func(r Result) float64 { return float64(r.Burst.Audit.Undersold) }, "%.0f")),
	}
	for _, res := range ran {
		if res.Fairness != nil && len(res.Burst.Arrivals) > 0 {
			charts = append(charts, fairnessChart(res.Strategy, res.Fairness, res.Burst.Arrivals))
		}
	}
	for _, res := range ran {
		if c := res.Burst.Carts; c != nil && len(c.Timeline) > 0 {
			charts = append(charts, cartChart(res.Strategy, r.Plan.Stock, c.Timeline))
		}
	}
	if r.Plan.Steady.Rate > 0 {
		steady := series(func(r Result) float64 {
			if r.Steady == nil {
				return 0
			}
			return r.Steady.Latency.P99
		}, "%.1f ms")
		charts = append(charts, barChart(fmt.Sprintf("Steady %g/s latency, p99", r.Plan.Steady.Rate), "milliseconds from when each request was due, lower is better", steady))
	}
	if r.Plan.Closed.Duration > 0 {
		var bars []bar
		for _, res := range ran {
			if c := res.Closed; c != nil {
				bars = append(bars, bar{label: res.Strategy, value: c.OrdersPerSecond(), text: fmt.Sprintf("%.0f/s, %d buyers", c.OrdersPerSecond(), res.ClosedBuyers), fail: res.Verdict() != "PASS"})
			}
		}
		charts = append(charts, barChart("Throughput: each closed loop's best step", "orders per second the database holds, at the buyers of the step, stock for every buyer; higher is better", bars))
	}
	if refused(ran) {
		var bars []bar
		for _, res := range ran {
			if c := res.ClosedRefusals; c != nil {
				bars = append(bars, bar{label: res.Strategy, value: c.PerSecond, text: fmt.Sprintf("%.0f/s", c.PerSecond), fail: res.Verdict() != "PASS"})
			}
		}
		charts = append(charts, barChart("Refusals: a closed loop on a sold-out SKU", "sold-out answers per second, at the closed loop's buyers; higher is better", bars))
	}
	if r.Plan.Surge.Rate > 0 {
		var bars []bar
		for _, res := range ran {
			if s := res.Surge; s != nil {
				bars = append(bars, bar{label: res.Strategy, value: s.Latency.P99, text: fmt.Sprintf("%.0f ms", s.Latency.P99), fail: res.Verdict() != "PASS"})
			}
		}
		charts = append(charts, barChart(fmt.Sprintf("Surge of %g/s: latency, p99", r.Plan.Surge.Rate), "milliseconds from when each buyer arrived, lower is better", bars))
	}
	if rows := r.cpuRows(); len(rows) > 0 {
		charts = append(charts, cpuChart(rows))
	}
	if len(r.Baselines) > 0 {
		bars := make([]bar, len(r.Baselines))
		for i, b := range r.Baselines {
			bars[i] = bar{label: b.Key, value: b.Throughput, text: fmt.Sprintf("%.0f/s", b.Throughput)}
		}
		charts = append(charts, barChart("Baselines: raw loops, and the HTTP stack alone", "operations per second on one hot row or key (sql-batched: orders)", bars))
	}
	return charts
}

type bar struct {
	label, text string
	value       float64
	fail        bool // drawn in the failure colour
}

// barChart draws horizontal bars, one row per label, each with its value
// written beside it.
func barChart(title, subtitle string, bars []bar) template.HTML {
	const (
		width, labelW, textW = 560, 120, 80
		rowH, top            = 26, 54
	)
	peak := 0.0
	for _, b := range bars {
		peak = max(peak, b.value)
	}
	height := top + rowH*len(bars) + 8
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, width, height, width, height)
	fmt.Fprintf(&s, `<text x="0" y="18" class="t">%s</text><text x="0" y="38" class="s">%s</text>`, esc(title), esc(subtitle))
	span := float64(width - labelW - textW)
	for i, b := range bars {
		y := top + i*rowH
		w := 0.0
		if peak > 0 {
			w = span * b.value / peak
		}
		class := "ok"
		if b.fail {
			class = "bad"
		}
		fmt.Fprintf(&s, `<text x="%d" y="%d" class="l">%s</text>`, labelW-8, y+17, esc(b.label))
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%.1f" height="%d" class="%s"/>`, labelW, y+4, max(w, 1), rowH-8, class)
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" class="v">%s</text>`, float64(labelW)+max(w, 1)+6, y+17, esc(b.text))
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String()) // every piece of text in it is escaped
}

// cartSeries are the lines of an abandoned-cart chart, in the order of
// its legend.
// Resold is dashed: in a sale that does not oversell it runs on expired.
var cartSeries = []struct {
	name, color, dash string
	units             func(CartPoint) int
}{
	{"held", "#d08a2c", "none", func(p CartPoint) int { return p.Held }},
	{"paid", "#2f7d5b", "none", func(p CartPoint) int { return p.Paid }},
	{"expired", "#c8402f", "none", func(p CartPoint) int { return p.Expired }},
	{"resold", "#2f6db5", "6 4", func(p CartPoint) int { return p.Resold }},
}

// cartChart draws the units of one abandoned-cart sale over time, one line
// per state, with the stock as a dashed line: paid must end on it.
func cartChart(strategy string, stock int, timeline []CartPoint) template.HTML {
	const (
		width, height          = 560, 260
		left, right, top, foot = 40, 16, 76, 28
	)
	peakUnits, end := stock, timeline[len(timeline)-1].At
	for _, p := range timeline {
		for _, sr := range cartSeries {
			peakUnits = max(peakUnits, sr.units(p))
		}
	}
	x := func(at float64) float64 { return left + (width-left-right)*at/max(end, 0.1) }
	y := func(units int) float64 { return top + (height-top-foot)*(1-float64(units)/float64(peakUnits)) }
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, width, height, width, height)
	fmt.Fprintf(&s, `<text x="0" y="18" class="t">Abandoned carts: %s</text><text x="0" y="38" class="s">%s</text>`, esc(strategy),
		esc(fmt.Sprintf("units by state, from the database; paid must end on the stock, %d (dashed)", stock)))
	at := 0
	for _, sr := range cartSeries {
		fmt.Fprintf(&s, `<rect x="%d" y="50" width="10" height="10" style="fill:%s"/><text x="%d" y="59" class="s">%s</text>`, at, sr.color, at+14, sr.name)
		at += 14 + 7*len(sr.name) + 12
	}
	fmt.Fprintf(&s, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" style="stroke:#8a8f98;stroke-dasharray:4 3"/>`, left, y(stock), width-right, y(stock))
	fmt.Fprintf(&s, `<text x="%d" y="%.1f" class="l">%d</text><text x="%d" y="%.1f" class="l">0</text>`, left-4, y(peakUnits)+4, peakUnits, left-4, y(0)+4)
	fmt.Fprintf(&s, `<text x="%d" y="%d" class="s">0 s</text><text x="%d" y="%d" class="s" text-anchor="end">%.1f s</text>`, left, height-8, width-right, height-8, end)
	for _, sr := range cartSeries {
		points := make([]string, len(timeline))
		for i, p := range timeline {
			points[i] = fmt.Sprintf("%.1f,%.1f", x(p.At), y(sr.units(p)))
		}
		fmt.Fprintf(&s, `<polyline points="%s" style="fill:none;stroke:%s;stroke-width:2;stroke-dasharray:%s"><title>%s</title></polyline>`,
			strings.Join(points, " "), sr.color, sr.dash, sr.name)
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String()) // every piece of text in it is escaped
}

func esc(s string) string { return template.HTMLEscapeString(s) }

// classColors colour the classes of CPUClasses, in order.
var classColors = []string{"#2f6db5", "#8a8f98", "#d08a2c", "#c8402f", "#9a5fb5", "#2f7d5b", "#3aa0a8"}

// cpuChart stacks, for http-echo and each strategy, the CPU per order of
// each class of process: where each order's CPU goes.
func cpuChart(rows []cpuRow) template.HTML {
	const (
		width, labelW, textW = 560, 120, 110
		rowH, top            = 26, 76
	)
	classes := usedClasses(rows)
	peak := 0.0
	for _, r := range rows {
		peak = max(peak, CPUPerOrder(r.classes))
	}
	height := top + rowH*len(rows) + 8
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, width, height, width, height)
	fmt.Fprintf(&s, `<text x="0" y="18" class="t">Where each order's CPU goes</text><text x="0" y="38" class="s">%s</text>`,
		esc("µs of CPU per order at the best closed step, by class of process; lower is better"))
	x := 0
	for _, name := range classes {
		fmt.Fprintf(&s, `<rect x="%d" y="50" width="10" height="10" style="fill:%s"/><text x="%d" y="59" class="s">%s</text>`, x, classColor(name), x+14, esc(name))
		x += 14 + 7*len(name) + 12
	}
	span := float64(width - labelW - textW)
	for i, r := range rows {
		y := top + i*rowH
		fmt.Fprintf(&s, `<text x="%d" y="%d" class="l">%s</text>`, labelW-8, y+17, esc(r.name))
		at := float64(labelW)
		for _, c := range r.classes {
			w := span * c.PerOrder / peak
			fmt.Fprintf(&s, `<rect x="%.1f" y="%d" width="%.1f" height="%d" style="fill:%s"><title>%s: %.1f µs</title></rect>`,
				at, y+4, w, rowH-8, classColor(c.Class), esc(c.Class), c.PerOrder)
			at += w
		}
		text := fmt.Sprintf("%.0f µs", CPUPerOrder(r.classes))
		if r.ofEcho > 0 && r.ofEcho != 1 {
			text += fmt.Sprintf(", %s echo", ratio(r.ofEcho))
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" class="v">%s</text>`, at+6, y+17, esc(text))
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String()) // every piece of text in it is escaped
}

func classColor(name string) string {
	if i := slices.Index(CPUClasses, name); i >= 0 {
		return classColors[i]
	}
	return "#444"
}

// fairnessChart draws one strategy's burst of buyers arriving in order:
// each buyer at the time of its answer (across) and its arrival rank
// (down the side), a winner in one colour and a refusal in another, with
// the arrivals as a dashed line. In a sale served first come, first
// served, the winners are the lowest ranks; a winner above refusals
// answered earlier overtook them.
func fairnessChart(strategy string, f *Fairness, arrivals []Arrival) template.HTML {
	const (
		width, height          = 560, 300
		left, right, top, foot = 48, 16, 76, 28
	)
	end, last := time.Duration(1), arrivals[len(arrivals)-1]
	for _, a := range arrivals {
		end = max(end, a.Answered)
	}
	x := func(d time.Duration) float64 { return left + (width-left-right)*float64(d)/float64(end) }
	y := func(rank int) float64 {
		return top + (height-top-foot)*float64(rank-1)/float64(max(1, len(arrivals)-1))
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, width, height, width, height)
	fmt.Fprintf(&s, `<text x="0" y="18" class="t">Who won: %s</text><text x="0" y="38" class="s">%s</text>`, esc(strategy),
		esc(fmt.Sprintf("arrival rank (down) by answer time (across); first come %.2f, %.0f overtakes/1000", f.FirstComeShare, f.OvertakesPer1000)))
	at := 0
	for _, k := range []struct{ name, color string }{{"won", winColor}, {"refused", refuseColor}, {"arrived (dashed)", "#8a8f98"}} {
		fmt.Fprintf(&s, `<rect x="%d" y="50" width="10" height="10" style="fill:%s"/><text x="%d" y="59" class="s">%s</text>`, at, k.color, at+14, k.name)
		at += 14 + 7*len(k.name) + 12
	}
	fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" style="stroke:#8a8f98;stroke-dasharray:4 3"/>`, x(0), y(1), x(last.Sent), y(last.Rank))
	fmt.Fprintf(&s, `<text x="%d" y="%.1f" class="l">1</text><text x="%d" y="%.1f" class="l">%d</text>`, left-4, y(1)+4, left-4, y(len(arrivals))+4, len(arrivals))
	fmt.Fprintf(&s, `<text x="%d" y="%d" class="s">0 ms</text><text x="%d" y="%d" class="s" text-anchor="end">%.0f ms</text>`, left, height-8, width-right, height-8, ms(end))
	// Refusals first, winners over them: the few winners stay visible.
	for _, won := range []bool{false, true} {
		color := map[bool]string{false: refuseColor, true: winColor}[won]
		fmt.Fprintf(&s, `<g style="fill:%s">`, color)
		for _, a := range arrivals {
			if (a.Outcome == Ordered) == won && (won || a.refused()) {
				fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="3" height="3"/>`, x(a.Answered)-1.5, y(a.Rank)-1.5)
			}
		}
		s.WriteString(`</g>`)
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String()) // every piece of text in it is escaped
}

// The colours of a winner and a refusal.
const winColor, refuseColor = "#2f7d5b", "#d08a2c"
