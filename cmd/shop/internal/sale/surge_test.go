package sale_test

import (
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/sale"
	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

// TestSurgeAndRefusals runs a tiny surge and a tiny refusal loop on lua
// and none, on MySQL and Redis, and checks that their figures add up:
// every arrival of the surge answered once, the surge's sale audited and
// its history checked, every answer of the refusal loop a refusal. lua
// sells exactly its stock; none, which does not guard it, oversells in
// the surge, and the surge's audit and history fail it.
func TestSurgeAndRefusals(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it reads MySQL's connections during the surge")
	redis := testinfra.Redis(t)
	surge := loadtest.Surge{Rate: 1000, Duration: 200 * time.Millisecond}
	rep, err := sale.Demo{
		Plan: loadtest.Plan{Strategies: []string{"none", "lua"}, Instances: 2, Stock: 5, Burst: loadtest.Burst{Buyers: 10}, Check: true,
			Closed: loadtest.Closed{Buyers: 4, MaxBuyers: 4, Duration: 300 * time.Millisecond}, Surge: surge},
		Config: demoConfig(t, map[string]string{"SHOP_MYSQL_DSN": testinfra.MySQL(t), "SHOP_REDIS_ADDR": redis.Addr, "SHOP_REDIS_PREFIX": redis.Prefix}),
	}.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	arrivals, units := surge.Arrivals(), surge.Units()
	for _, r := range rep.Results {
		s, refusals := r.Surge, r.Refusals
		if s == nil || refusals == nil || r.ClosedRefusals == nil {
			t.Fatalf("%s: surge %v, refusals %v: %s", r.Strategy, s, refusals, r.Error)
		}
		if s.Arrivals != arrivals || s.Requests != arrivals || s.Outcomes.Total() != arrivals || s.Stock != units {
			t.Errorf("%s: %d arrivals, %d answers, outcomes %+v, %d units; want %d arrivals each answered once, %d units",
				r.Strategy, s.Arrivals, s.Requests, s.Outcomes, s.Stock, arrivals, units)
		}
		if c := s.MySQLConnections; c == nil || c.Samples < 1 || c.Peak < c.Before || c.Before < 1 {
			t.Errorf("%s: MySQL's connections %+v, want read before and during the surge", r.Strategy, c)
		}
		if s.History == nil {
			t.Errorf("%s: the surge's history was not checked", r.Strategy)
		}
		if refusals.Requests == 0 || refusals.SoldOut != refusals.Requests || r.ClosedRefusals.PerSecond <= 0 {
			t.Errorf("%s: refusal loop of %d answers, %d sold out, %.0f/s; want every answer a refusal",
				r.Strategy, refusals.Requests, refusals.SoldOut, r.ClosedRefusals.PerSecond)
		}
		if r.ClosedRefusals.OfEcho != nil || r.ClosedRefusals.CPU != nil {
			t.Errorf("%s: the demo measured no echo and no CPU, yet closed_refusals is %+v", r.Strategy, r.ClosedRefusals)
		}
		switch r.Strategy {
		case "lua":
			a := s.Audit
			if a.Sold != units || a.Orders != units || s.Outcomes.Ordered != units || a.Oversold != 0 || a.Undersold != 0 || len(s.Problems) != 0 || !s.History.Linearizable {
				t.Errorf("lua: surge audit %+v, outcomes %+v, problems %q, history %v; want %d units sold, each to a 201, and no problem",
					a, s.Outcomes, s.Problems, s.History, units)
			}
			if len(refusals.Problems) != 0 || r.Verdict() != "PASS" {
				t.Errorf("lua: %s, refusals' problems %q", r.Verdict(), refusals.Problems)
			}
		case "none":
			if s.Audit.Oversold == 0 || s.History.Linearizable || r.Verdict() != "FAIL" {
				t.Errorf("none: surge audit %+v, history %v, %s; want it oversold, its history rejected, and FAIL", s.Audit, s.History, r.Verdict())
			}
		}
	}
}
