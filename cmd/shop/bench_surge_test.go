package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

// TestBenchRefusalsAndSurge runs a small bench of lua with --closed and
// --surge, with the shop binary as its child processes, and checks what
// its JSON says of both: the refusals' rate over http-echo's loop of the
// same buyers for as long, their CPU per refusal by class, and a surge
// whose every arrival was answered once, whose sale sold its stock and no
// more, and during which MySQL's connections were read.
func TestBenchRefusalsAndSurge(t *testing.T) {
	t.Parallel()
	redis := testinfra.Redis(t)
	jsonFile := filepath.Join(t.TempDir(), "bench.json")
	args := []string{"bench", "--bin", shoptest.Bin(t), "--mysql", testinfra.MySQL(t), "--redis", redis.Addr, "--strategies", "lua",
		"--stock", "10", "--buyers", "40", "--instances", "2", "--baseline", "200ms", "--closed", "600ms", "--closed-buyers", "4", "--closed-max-buyers", "4",
		"--surge", "400", "--surge-for", "500ms", "--json", jsonFile}
	var stdout strings.Builder
	getenv := func(k string) string { return map[string]string{"SHOP_REDIS_PREFIX": redis.Prefix}[k] }
	if err := run(t.Context(), args, getenv, &stdout, io.Discard); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	for _, want := range []string{"\nrefusals: ", "\nsurge: 400 arrivals/s for 500ms (200 buyers"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the tables lack %q:\n%s", want, stdout.String())
		}
	}
	data, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadtest.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	j := slices.IndexFunc(rep.Baselines, func(b loadtest.BaselineResult) bool { return b.Key == string(strategy.HTTPEcho) })
	if j < 0 {
		t.Fatalf("no http-echo baseline: %+v", rep.Baselines)
	}
	echo := rep.Baselines[j]
	// Echo's loop runs as long as the strategies' closed loop (600 ms),
	// not the other baselines' 200 ms. Its seconds are measured from its
	// answers, which a loaded machine may end a little before the loop's
	// time (0.58 s in one run): anything well past 200 ms is the loop's.
	if echo.Seconds < 0.4 {
		t.Errorf("http-echo's closed loop ran %.2f s, want about the closed loop's 600ms, not the baselines' 200ms", echo.Seconds)
	}
	r := rep.Results[0]
	if r.Strategy != "lua" || r.Refusals == nil || r.ClosedRefusals == nil || r.Surge == nil {
		t.Fatalf("lua: refusals %v, surge %v: %s", r.ClosedRefusals, r.Surge, r.Error)
	}
	c := r.ClosedRefusals
	step := slices.IndexFunc(echo.Steps, func(s loadtest.ClosedStep) bool { return s.Buyers == r.ClosedBuyers })
	if step < 0 || c.OfEcho == nil || math.Abs(*c.OfEcho-c.PerSecond/echo.Steps[step].PerSecond) > 1e-9 {
		t.Errorf("refusals %.0f/s of echo %v, echo's steps %+v; want their rate over echo's at %d buyers", c.PerSecond, c.OfEcho, echo.Steps, r.ClosedBuyers)
	}
	if p := r.Refusals; p.Requests == 0 || p.SoldOut != p.Requests || len(p.Problems) != 0 {
		t.Errorf("refusal loop: %d answers, %d sold out, problems %q; want every answer a refusal", p.Requests, p.SoldOut, p.Problems)
	}
	if cpu := c.CPU; cpu == nil || cpu.Shops <= 0 || cpu.Load <= 0 || cpu.Total < cpu.Shops+cpu.Load+cpu.MySQL+cpu.Redis-1e-9 {
		t.Errorf("CPU per refusal %+v, want the shops' and the load generator's, within the total", cpu)
	}
	s := r.Surge
	if s.Outcomes.Total() != 200 || s.Requests != 200 || s.Audit.Sold != 20 || s.Outcomes.Ordered != 20 || s.Audit.Oversold != 0 || len(s.Problems) != 0 {
		t.Errorf("surge: outcomes %+v, %d answers, audit %+v, problems %q; want 200 answers, 20 of them 201, and 20 units sold",
			s.Outcomes, s.Requests, s.Audit, s.Problems)
	}
	if m := s.MySQLConnections; m == nil || m.Peak < m.Before || m.Samples < 1 {
		t.Errorf("MySQL's connections during the surge: %+v", m)
	}
	// The exact shape of closed_refusals, as JSON.
	var raw struct {
		Results []struct {
			ClosedRefusals map[string]json.RawMessage `json:"closed_refusals"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var cpu map[string]float64
	if err := json.Unmarshal(raw.Results[0].ClosedRefusals["cpu_us"], &cpu); err != nil || len(raw.Results[0].ClosedRefusals) != 3 || len(cpu) != 5 {
		t.Errorf("closed_refusals %s (%v), want refusals_per_s, of_echo and cpu_us of shops, load, mysql, redis and total", raw.Results[0].ClosedRefusals, err)
	}
}
