package loadtest

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
)

//go:embed report.html.tmpl
var reportHTML string

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct": percent,
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
		Charts []template.HTML
	}{r, r.charts()})
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
		closed := series(func(r Result) float64 { return r.Closed.OrdersPerSecond() }, "%.0f/s")
		charts = append(charts, barChart("Throughput: "+r.Plan.Closed.describe(),
			"orders per second the database holds, stock for every buyer, higher is better", closed))
	}
	if len(r.Baselines) > 0 {
		bars := make([]bar, len(r.Baselines))
		for i, b := range r.Baselines {
			bars[i] = bar{label: b.Key, value: b.Throughput, text: fmt.Sprintf("%.0f/s", b.Throughput)}
		}
		charts = append(charts, barChart("Ceilings: raw loops, and the HTTP stack alone", "operations per second on one hot row or key (sql-batched: orders)", bars))
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

func esc(s string) string { return template.HTMLEscapeString(s) }
