package loadtest

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// ClassCPU is the CPU time that one class of process used during a load:
// the shops, the load generator, or one kind of server.
type ClassCPU struct {
	// Class is shops, load generator, or a server: mysql, redis, redlock,
	// zookeeper, etcd.
	Class     string  `json:"class"`
	Processes int     `json:"processes"`   // measured
	Seconds   float64 `json:"cpu_seconds"` // user and system, during the load
	// PerOrder is Seconds over the load's orders, in microseconds; a
	// refusal loop's is over its refusals (PerUnit).
	PerOrder float64 `json:"us_per_order"`
	// Missing says why the class, or some of its processes, could not be
	// measured; its figures then count only what was.
	Missing string `json:"missing,omitempty"`
}

// CPUClasses are the classes in the order reports show them.
var CPUClasses = []string{"shops", "load generator", "mysql", "redis", "redlock", "zookeeper", "etcd"}

// CPUPerOrder is the CPU time, in microseconds, that every class measured
// used per order.
func CPUPerOrder(classes []ClassCPU) float64 {
	total := 0.0
	for _, c := range classes {
		total += c.PerOrder
	}
	return total
}

// PerUnit returns classes with each class's PerOrder over n units instead:
// a refusal loop's CPU per refusal, where the database holds no order.
func PerUnit(classes []ClassCPU, n int) []ClassCPU {
	out := make([]ClassCPU, len(classes))
	for i, c := range classes {
		c.PerOrder = 0
		if n > 0 {
			c.PerOrder = c.Seconds / float64(n) * 1e6
		}
		out[i] = c
	}
	return out
}

// cpuRow is one row of the CPU table: a strategy's best closed step, or
// http-echo's.
type cpuRow struct {
	name    string
	rate    float64 // orders or requests per second
	classes []ClassCPU
	ofEcho  float64
}

// cpuRows are the rows of the CPU table: http-echo first, then each
// strategy whose closed loop was measured.
func (r *Report) cpuRows() []cpuRow {
	var rows []cpuRow
	for _, b := range r.Baselines {
		if len(b.CPU) > 0 {
			rows = append(rows, cpuRow{name: b.Key, rate: b.Throughput, classes: b.CPU, ofEcho: 1})
		}
	}
	for _, res := range r.Results {
		if res.Closed != nil && len(res.Closed.CPU) > 0 {
			rows = append(rows, cpuRow{name: res.Strategy, rate: res.Closed.OrdersPerSecond(), classes: res.Closed.CPU, ofEcho: res.ClosedCPUOfEcho})
		}
	}
	return rows
}

// usedClasses are the classes that any row measured, in CPUClasses'
// order, then any other, such as each node of a Redis Cluster, in the
// order first measured.
func usedClasses(rows []cpuRow) []string {
	var used []string
	for _, name := range CPUClasses {
		if slices.ContainsFunc(rows, func(r cpuRow) bool {
			return slices.ContainsFunc(r.classes, func(c ClassCPU) bool { return c.Class == name })
		}) {
			used = append(used, name)
		}
	}
	for _, r := range rows {
		for _, c := range r.classes {
			if !slices.Contains(CPUClasses, c.Class) && !slices.Contains(used, c.Class) {
				used = append(used, c.Class)
			}
		}
	}
	return used
}

// writeCPU writes where each order's CPU went, by class of process, and
// what could not be measured.
func writeCPU(w io.Writer, rows []cpuRow) {
	t := newCPUTable(rows)
	fmt.Fprintln(w, "\nCPU per order at the best closed step, µs by class of process, from each process's CPU time before and after the step:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\torders/s\t"+strings.Join(t.Classes, "\t")+"\ttotal\tof echo\t")
	for _, c := range t.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", c.Name, c.Rate, strings.Join(c.Cells, "\t"), c.Total, c.OfEcho)
	}
	tw.Flush()
	for _, m := range t.Missing {
		fmt.Fprintln(w, "  not measured: "+m)
	}
}

// ratio is f as "1.23×", or "-" for none.
func ratio(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", f)
}

// cpuTable is the CPU table as the HTML report shows it.
type cpuTable struct {
	Classes []string
	Rows    []cpuCells
	Missing []string
}

type cpuCells struct {
	Name, Rate, Total, OfEcho string
	Cells                     []string
}

func newCPUTable(rows []cpuRow) cpuTable {
	t := cpuTable{Classes: usedClasses(rows)}
	for _, row := range rows {
		c := cpuCells{Name: row.name, Rate: fmt.Sprintf("%.0f", row.rate), Total: fmt.Sprintf("%.1f", CPUPerOrder(row.classes)), OfEcho: ratio(row.ofEcho)}
		for _, name := range t.Classes {
			cell := "-"
			if i := slices.IndexFunc(row.classes, func(c ClassCPU) bool { return c.Class == name }); i >= 0 {
				if cell = "?"; row.classes[i].Processes > 0 {
					cell = fmt.Sprintf("%.1f", row.classes[i].PerOrder)
				}
				if m := row.classes[i].Missing; m != "" {
					t.Missing = append(t.Missing, fmt.Sprintf("%s, %s: %s", row.name, name, m))
				}
			}
			c.Cells = append(c.Cells, cell)
		}
		t.Rows = append(t.Rows, c)
	}
	t.Missing = slices.Compact(t.Missing)
	return t
}
