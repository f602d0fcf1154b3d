package loadtest_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/loadtest"
)

// TestHTMLHoldsEveryTable: every column of every table of the text report
// is a column of the HTML page, under the same name.
func TestHTMLHoldsEveryTable(t *testing.T) {
	t.Parallel()
	phase := func() *loadtest.Phase {
		return &loadtest.Phase{Stats: loadtest.Stats{Requests: 10, Ordered: 5, Seconds: 1}, Audit: audit.Audit{SKU: "s", Initial: 5, Orders: 5},
			CPU: []loadtest.ClassCPU{{Class: "shops", Processes: 1, Seconds: 1, PerOrder: 10}}}
	}
	rep := loadtest.NewReport("bench", loadtest.Plan{Instances: 1, Stock: 5,
		Burst:  loadtest.Burst{Buyers: 10, Arrivals: time.Second},
		Steady: loadtest.Steady{Rate: 10, Duration: time.Second},
		Closed: loadtest.Closed{Buyers: 4, Duration: time.Second, Cart: 2},
		Surge:  loadtest.Surge{Rate: 100, Duration: time.Second}})
	rep.Baselines = []loadtest.BaselineResult{{Key: "http-echo", Name: "echo", Workers: 4, CPU: []loadtest.ClassCPU{{Class: "shops", Processes: 1, PerOrder: 5}}}}
	rep.Results = []loadtest.Result{{Strategy: "atomic", Instances: 1, Burst: phase(), Steady: phase(), Closed: phase(), ClosedCart: phase(),
		ClosedBuyers: 4, ClosedSteps: []loadtest.ClosedStep{{Buyers: 4, PerSecond: 5}}, Baseline: "sql-atomic", Fraction: 0.5,
		Usage: []loadtest.Usage{{CPUSeconds: 1}}, Fairness: &loadtest.Fairness{FirstComeShare: 1, Winners: 5},
		Refusals: phase(), ClosedRefusals: loadtest.NewRefusals(phase(), 20), Surge: &loadtest.SurgeResult{Phase: *phase(),
			SurgeStats: loadtest.SurgeStats{Arrivals: 100, Stock: 10, MySQLConnections: &loadtest.Connections{Peak: 3}}}}}
	var text, page strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	columns := regexp.MustCompile(`\S+(?: \S+)*`)
	tables := 0
	for _, line := range strings.Split(text.String(), "\n") {
		head := strings.TrimSpace(line)
		if !strings.HasPrefix(head, "strategy ") && !strings.HasPrefix(head, "baseline ") && !strings.HasPrefix(head, "orders/s ") {
			continue
		}
		tables++
		for _, name := range columns.FindAllString(strings.ReplaceAll(head, "   ", "\t"), -1) {
			if name = strings.TrimSpace(name); !strings.Contains(page.String(), "<th>"+name+"</th>") {
				t.Errorf("the page has no column %q of the text's table %q", name, head)
			}
		}
	}
	// Bursts, fairness, steady, throughput, of carts, refusals, surge,
	// baselines, CPU.
	if tables != 9 {
		t.Errorf("%d tables in the text, want 9:\n%s", tables, text.String())
	}
}
