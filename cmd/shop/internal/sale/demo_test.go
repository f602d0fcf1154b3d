package sale_test

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/sale"
	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

// oversells lists the strategies that must oversell, with the fewest
// instances at which they do: that is what the demo teaches.
var oversells = map[string]int{
	"none":  1, // no guard at all
	"local": 2, // a mutex guards one process only
}

// rounds is how many bursts a strategy that must oversell has to show it,
// and raceStock the units that each burst after the first puts on sale,
// to twice as many buyers. The oversell is a race, which shows in some
// sales and not in others: on SQLite, where one write runs at a time and
// each is short, local's race across instances shows in about one sale in
// a hundred. In this test's configuration, on a machine loaded by other
// test runs (2026-11-25), local oversold in 4 of 20 bursts of 20 units, 7
// of 20 of 50, 16 of 20 of 100 and 10 of 10 of 200, under -race as well.
// A burst of 20 units, the demo's here, misses it often, and 20 of them all
// about once in 100; a burst of 200 units misses it about once in 15, and
// 20 such bursts all far less than once in 10^20, or once in 10^5 should
// the race be four times rarer than measured.
const rounds, raceStock = 20, 200

// TestDemo runs the demo as `shop demo` does with nothing configured, only
// smaller, and checks what the database says was sold.
func TestDemo(t *testing.T) {
	t.Parallel()
	for _, instances := range []int{3, 1} {
		t.Run(fmt.Sprint(instances, " instances"), func(t *testing.T) {
			t.Parallel()
			checkDemo(t, sale.Demo{Plan: loadtest.Plan{Instances: instances, Stock: 20, Burst: loadtest.Burst{Buyers: 200}, Check: true},
				Config: demoConfig(t, nil)}, false)
		})
	}
}

// TestDemoOnRealServers runs the demo as it runs with SHOP_* set: on MySQL,
// Redis and ZooKeeper, every strategy. Buyer authentication and a buyer
// rate limit in the environment are left out: the demo's buyers carry no
// token.
func TestDemoOnRealServers(t *testing.T) {
	t.Parallel()
	redis, etcd := testinfra.Redis(t), testinfra.Etcd(t)
	checkDemo(t, sale.Demo{
		Plan: loadtest.Plan{Instances: 3, Stock: 20, Burst: loadtest.Burst{Buyers: 200}, Check: true},
		Config: demoConfig(t, map[string]string{"SHOP_MYSQL_DSN": testinfra.MySQL(t), "SHOP_REDIS_ADDR": redis.Addr,
			"SHOP_REDIS_PREFIX": redis.Prefix, "SHOP_ZK_ADDRS": strings.Join(testinfra.ZooKeeper(t).Addrs, ","),
			"SHOP_ETCD_ADDRS": strings.Join(etcd.Endpoints, ","), "SHOP_ETCD_PREFIX": etcd.Prefix,
			"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_SECRET": strings.Repeat("s", 32), "SHOP_BUYER_RATE": "1/h"}),
	}, true)
}

// demoConfig reads the shop's configuration from env as `shop demo` does.
func demoConfig(t *testing.T, env map[string]string) config.Config {
	t.Helper()
	read := config.Flags(flag.NewFlagSet("demo", flag.ContinueOnError), func(k string) string { return env[k] }, strategy.Names(), config.ForLoad)
	cfg, err := read()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// checkDemo runs d and checks that every strategy ran, or was skipped for
// want of a lock server it does not embed (servers false) or of MySQL, and
// sold what the demo must show it sells.
func checkDemo(t *testing.T, d sale.Demo, servers bool) {
	t.Helper()
	rep, err := d.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.Backends[0].What, map[bool]string{true: "MySQL", false: "SQLite"}[d.Config.MySQLDSN != ""]; !strings.HasPrefix(got, want) {
		t.Errorf("database %q, want %s", got, want)
	}
	if got, want := len(rep.Results), len(strategy.Names()); got != want {
		t.Errorf("%d results for %d strategies", got, want)
	}
	for _, r := range rep.Results {
		s, err := strategy.Lookup(r.Strategy)
		if err != nil {
			t.Fatal(err)
		}
		switch min, mustOversell := oversells[r.Strategy]; {
		case r.Skipped != "":
			unembedded := slices.Contains(s.Needs, backend.ZooKeeper) || slices.Contains(s.Needs, backend.Etcd)
			if (servers || !unembedded) && (d.Config.MySQLDSN != "" || s.Embedded.Skip == "") {
				t.Errorf("%s skipped: %s; only what needs ZooKeeper or etcd, or MySQL, may be", r.Strategy, r.Skipped)
			}
		case r.Burst == nil:
			t.Errorf("%s did not run: %s", r.Strategy, r.Error)
		case mustOversell && d.Plan.Instances >= min:
			if !oversold(t, d, r) {
				t.Errorf("%s on %d instances did not oversell in %d bursts, %d of them of %d units; the demo must show it",
					r.Strategy, d.Plan.Instances, rounds, rounds-1, raceStock)
			}
		default:
			if a := r.Burst.Audit; a.Oversold != 0 || a.Undersold != 0 || r.Verdict() != "PASS" {
				t.Errorf("%s on %d instances: oversold %d, undersold %d, verdict %s, problems %q; want 0, 0, PASS",
					r.Strategy, d.Plan.Instances, a.Oversold, a.Undersold, r.Verdict(), r.Burst.Problems)
			}
			if h := r.Burst.History; h == nil || !h.Linearizable {
				t.Errorf("%s on %d instances: the history's verdict is %v, want linearizable", r.Strategy, d.Plan.Instances, h)
			}
		}
	}
}

// oversold reports whether r, or one of the bursts of its strategy run
// again, of raceStock units each, up to rounds in all, oversold and failed
// for it, its history rejected by the checker.
func oversold(t *testing.T, d sale.Demo, r loadtest.Result) bool {
	t.Helper()
	d.Plan.Strategies = []string{r.Strategy}
	d.Plan.Stock, d.Plan.Burst.Buyers = raceStock, 2*raceStock
	for round := 1; ; round++ {
		// The checker must catch in the answers what the audit finds in
		// the database.
		if b := r.Burst; b != nil && b.Audit.Oversold > 0 && r.Verdict() == "FAIL" && b.History != nil && !b.History.Linearizable {
			if round > 1 {
				t.Logf("%s oversold in burst %d", r.Strategy, round)
			}
			return true
		}
		if round == rounds {
			return false
		}
		rep, err := d.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		r = rep.Results[0]
	}
}

// TestDemoArrivals: buyers arriving one by one to atomic on one instance,
// whose conditional UPDATE takes them as they come, are served first come,
// first served, and the demo says so.
func TestDemoArrivals(t *testing.T) {
	t.Parallel()
	rep, err := sale.Demo{Plan: loadtest.Plan{Instances: 1, Stock: 10, Strategies: []string{"atomic"},
		Burst: loadtest.Burst{Buyers: 40, Arrivals: 2 * time.Second, OvertakeGap: loadtest.DefaultOvertakeGap}},
		Config: demoConfig(t, nil)}.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Verdict() != "PASS" || r.Fairness == nil {
		t.Fatalf("atomic: %s, fairness %+v: %+v", r.Verdict(), r.Fairness, r)
	}
	// 50 ms apart: a buyer is answered before the next arrives, unless
	// the machine stalls for longer, which a loaded one does now and then
	// (seen: 548 ms) and which may let a buyer or two pass one or two
	// others; with 10 winners, each such pair is 100 overtakes per 1,000.
	// So the test asks for most winners among the first arrivals, and
	// none far behind them. A strategy that serves in reverse scores a
	// share near 0, and its latest winner is the last arrival
	// (loadtest.TestFairnessCanFail).
	if f := r.Fairness; f.Winners != 10 || f.FirstComeShare < 0.7 || f.LatestWinnerRank > 20 {
		t.Errorf("atomic on one instance: %+v, want 10 winners, a first-come share near 1 and the latest winner among the first 20", f)
	}
}
