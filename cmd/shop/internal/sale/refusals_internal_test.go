package sale

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// TestRefusalsOfEcho: each strategy's refusals are compared with
// http-echo's closed loop of the same buyers: one that echo's search ran
// is taken from it, and one it did not is run once, on echo instances
// started for it, for the closed loop's duration, and added to the
// http-echo baseline's steps. The echo instances are the shop's HTTP
// stack alone, served in this process.
func TestRefusalsOfEcho(t *testing.T) {
	t.Parallel()
	launched := 0
	launch := func(ctx context.Context, _ string, instances int) (Fleet, error) {
		launched++
		var f Fleet
		var servers []*httptest.Server
		for range instances {
			srv := httptest.NewServer(httpapi.Echo())
			servers = append(servers, srv)
			f.URLs = append(f.URLs, srv.URL)
		}
		f.Stop = func() ([]loadtest.Usage, error) {
			for _, srv := range servers {
				srv.Close()
			}
			return nil, nil
		}
		return f, nil
	}
	refusals := func() *loadtest.Phase {
		return &loadtest.Phase{Stats: loadtest.Stats{Requests: 500, SoldOut: 500, Seconds: 1}}
	}
	rep := &loadtest.Report{
		Baselines: []loadtest.BaselineResult{{Key: string(strategy.HTTPEcho), Steps: []loadtest.ClosedStep{{Buyers: 4, PerSecond: 1000}}}},
		Results: []loadtest.Result{
			{Strategy: "lua", ClosedBuyers: 8, Refusals: refusals()},
			{Strategy: "batched", ClosedBuyers: 4, Refusals: refusals()},
			{Strategy: "atomic", ClosedBuyers: 8, Refusals: refusals()},
			{Strategy: "none", ClosedBuyers: 16}, // no refusal loop: nothing to compare
		},
	}
	b := Bench{Plan: loadtest.Plan{Instances: 2, Closed: loadtest.Closed{Duration: 200 * time.Millisecond}}}
	if err := b.compareRefusals(t.Context(), rep, echoLoops{4: 1000}, launch); err != nil {
		t.Fatal(err)
	}
	if launched != 1 {
		t.Errorf("echo was started %d times for the refusals, want once", launched)
	}
	steps := rep.Baselines[0].Steps
	if len(steps) != 2 || steps[0].Buyers != 4 || steps[1].Buyers != 8 || steps[1].PerSecond <= 0 {
		t.Fatalf("http-echo's steps %+v, want the search's 4 buyers and the refusals' 8, measured", steps)
	}
	for _, r := range rep.Results {
		c := r.ClosedRefusals
		switch {
		case r.Refusals == nil:
			if c != nil {
				t.Errorf("%s: no refusal loop, yet %+v", r.Strategy, c)
			}
		case c == nil || c.OfEcho == nil:
			t.Errorf("%s: refusals not compared with echo: %+v", r.Strategy, c)
		case r.ClosedBuyers == 4 && *c.OfEcho != 0.5, r.ClosedBuyers == 8 && *c.OfEcho != 500/steps[1].PerSecond:
			t.Errorf("%s: %d buyers, of echo %g; want 500/s over echo's rate at %d buyers, %v", r.Strategy, r.ClosedBuyers, *c.OfEcho, r.ClosedBuyers, steps)
		}
	}
	if !slices.IsSortedFunc(steps, func(a, b loadtest.ClosedStep) int { return a.Buyers - b.Buyers }) {
		t.Errorf("steps %+v not by buyers", steps)
	}
}
