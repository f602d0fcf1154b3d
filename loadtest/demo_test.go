package loadtest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

// oversells lists the strategies that must oversell, with the fewest
// instances at which they do: that is what the demo teaches.
var oversells = map[string]int{
	"none":  1, // no guard at all
	"local": 2, // a mutex guards one process only
}

// TestDemo runs the demo as `shop demo` does with nothing configured, only
// smaller, and checks what the database says was sold.
func TestDemo(t *testing.T) {
	t.Parallel()
	for _, instances := range []int{3, 1} {
		t.Run(fmt.Sprint(instances, " instances"), func(t *testing.T) {
			t.Parallel()
			plan := loadtest.Plan{Instances: instances, Stock: 20, Burst: loadtest.Burst{Buyers: 200}}
			rep, err := loadtest.Demo{Plan: plan}.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, rep, instances, false)
		})
	}
}

// TestDemoOnRealServers runs the demo as it runs with SHOP_* set: on MySQL,
// Redis and ZooKeeper, every strategy.
func TestDemoOnRealServers(t *testing.T) {
	t.Parallel()
	redis := testinfra.Redis(t)
	d := loadtest.Demo{
		Plan:   loadtest.Plan{Instances: 3, Stock: 20, Burst: loadtest.Burst{Buyers: 200}},
		MySQL:  testinfra.MySQL(t),
		Redis:  redis.Addr,
		ZK:     testinfra.ZooKeeper(t).Addrs,
		Getenv: func(key string) string { return map[string]string{"SHOP_REDIS_PREFIX": redis.Prefix}[key] },
	}
	rep, err := d.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Backends[0].What, "MySQL") {
		t.Errorf("database %q, want the MySQL given", rep.Backends[0].What)
	}
	checkResults(t, rep, d.Plan.Instances, true)
}

// checkResults checks every strategy ran, or with zk false was skipped for
// want of ZooKeeper, and sold what the demo must show it sells.
func checkResults(t *testing.T, rep *loadtest.Report, instances int, zk bool) {
	t.Helper()
	if got, want := len(rep.Results), len(app.Strategies); got != want {
		t.Errorf("%d results for %d strategies", got, want)
	}
	for _, r := range rep.Results {
		s, err := app.Lookup(r.Strategy)
		if err != nil {
			t.Fatal(err)
		}
		if r.Skipped != "" {
			if zk || !slices.Contains(s.Needs, "zookeeper") {
				t.Errorf("%s skipped: %s; only what needs ZooKeeper may be", r.Strategy, r.Skipped)
			}
			continue
		}
		if r.Burst == nil {
			t.Errorf("%s did not run: %s", r.Strategy, r.Error)
			continue
		}
		a := r.Burst.Audit
		if min, ok := oversells[r.Strategy]; ok && instances >= min {
			if a.Oversold == 0 || r.Verdict() != "FAIL" {
				t.Errorf("%s on %d instances: oversold %d, verdict %s; the demo must show it oversell", r.Strategy, instances, a.Oversold, r.Verdict())
			}
			continue
		}
		if a.Oversold != 0 || a.Undersold != 0 || r.Verdict() != "PASS" {
			t.Errorf("%s on %d instances: oversold %d, undersold %d, verdict %s, problems %q; want 0, 0, PASS",
				r.Strategy, instances, a.Oversold, a.Undersold, r.Verdict(), r.Burst.Problems)
		}
	}
}
