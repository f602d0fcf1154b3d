package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

// TestLoadFlagErrors: demo and bench refuse a bad plan before they start
// anything, with an error that says what is wrong.
func TestLoadFlagErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no stock", []string{"--stock", "0"}, "stock must be at least 1 unit"},
		{"fewer buyers than stock", []string{"--stock", "100", "--buyers", "99"}, "buyers (99) must be at least the stock (100)"},
		{"unknown strategy", []string{"--strategies", "atomic,magic"}, `unknown strategy "magic"`},
		{"no instances", []string{"--instances", "0"}, "instances must be at least 1"},
		{"rate too short", []string{"--rate", "10", "--duration", "10ms"}, "sends no buyers"},
		{"stray argument", []string{"now"}, `unexpected argument "now"`},
		{"negative arrivals", []string{"--arrivals", "-1s"}, "arrivals and the overtake gap must not be negative"},
		{"arrivals in flight", []string{"--arrivals", "1s", "--concurrency", "8"}, "arrivals (1s) and concurrency (8) do not go together"},
	}
	for _, cmd := range []string{"demo", "bench"} {
		for _, tt := range tests {
			t.Run(cmd+" "+tt.name, func(t *testing.T) {
				t.Parallel()
				env := map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_REDIS_ADDR": "127.0.0.1:1"}
				err := run(t.Context(), append([]string{cmd}, tt.args...), func(k string) string { return env[k] }, io.Discard, io.Discard)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("err = %v, want it to mention %q", err, tt.want)
				}
			})
		}
	}
}

// TestCartFlagErrors: demo and bench refuse --unpaid without a payment
// window, or out of [0, 1), before they start anything; the window may
// come from SHOP_PAYMENT_WINDOW as from its flag.
func TestCartFlagErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, window string
		args         []string
		want, not    string
	}{
		{"no window", "", []string{"--unpaid", "0.3"}, "unpaid (0.3) needs a payment window (--payment-window)", ""},
		{"all unpaid", "", []string{"--payment-window", "2s", "--unpaid", "1"}, "at least 0 and less than 1, not 1", ""},
		{"negative", "", []string{"--payment-window", "2s", "--unpaid", "-0.1"}, "at least 0 and less than 1, not -0.1", ""},
		{"not a number", "", []string{"--payment-window", "2s", "--unpaid", "a third"}, `invalid value "a third" for flag -unpaid`, ""},
		{"window from the environment", "2s", []string{"--unpaid", "0.3", "--stock", "0"}, "stock must be at least 1 unit", "payment window"},
	}
	for _, cmd := range []string{"demo", "bench"} {
		for _, tt := range tests {
			t.Run(cmd+" "+tt.name, func(t *testing.T) {
				t.Parallel()
				env := map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_REDIS_ADDR": "127.0.0.1:1", "SHOP_PAYMENT_WINDOW": tt.window}
				err := run(t.Context(), append([]string{cmd}, tt.args...), func(k string) string { return env[k] }, io.Discard, io.Discard)
				if err == nil || !strings.Contains(err.Error(), tt.want) || tt.not != "" && strings.Contains(err.Error(), tt.not) {
					t.Errorf("err = %v, want it to mention %q and not %q", err, tt.want, tt.not)
				}
			})
		}
	}
}

// TestCartMixFlagErrors: demo and bench refuse a cart mix (--cart) of
// more lines than an order takes, or negative, and with a payment window,
// from its flag or SHOP_PAYMENT_WINDOW, before they start anything.
func TestCartMixFlagErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, window string
		args         []string
		want         string
	}{
		{"negative", "", []string{"--cart", "-1"}, "cart is the most SKUs in an order's cart, 2 to 20, or 0 for orders of one SKU; not -1"},
		{"too many lines", "", []string{"--cart", "21"}, "2 to 20, or 0 for orders of one SKU; not 21"},
		{"not a number", "", []string{"--cart", "three"}, `invalid value "three" for flag -cart`},
		{"with a payment window", "", []string{"--cart", "3", "--payment-window", "2s"}, "a cart mix (cart 3) and a payment window (--payment-window or SHOP_PAYMENT_WINDOW) do not go together"},
		{"with a payment window from the environment", "2s", []string{"--cart", "2", "--unpaid", "0.3"}, "a cart mix (cart 2) and a payment window"},
	}
	for _, cmd := range []string{"demo", "bench"} {
		for _, tt := range tests {
			t.Run(cmd+" "+tt.name, func(t *testing.T) {
				t.Parallel()
				env := map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_REDIS_ADDR": "127.0.0.1:1", "SHOP_PAYMENT_WINDOW": tt.window}
				err := run(t.Context(), append([]string{cmd}, tt.args...), func(k string) string { return env[k] }, io.Discard, io.Discard)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("err = %v, want it to mention %q", err, tt.want)
				}
			})
		}
	}
}

// TestNamedStrategyNeedsItsServer: a strategy named on the command line
// whose server is not configured is an error, not a silent skip.
func TestNamedStrategyNeedsItsServer(t *testing.T) {
	t.Parallel()
	all := strategy.All()
	for _, tt := range []struct {
		cmd  string
		need backend.Need
	}{{"demo", backend.ZooKeeper}, {"demo", backend.Etcd}, {"bench", backend.Redlock}, {"bench", backend.ZooKeeper}, {"bench", backend.Etcd}} {
		i := slices.IndexFunc(all, func(s strategy.Strategy) bool { return slices.Contains(s.Needs, tt.need) })
		if i < 0 {
			continue // no strategy needs it yet
		}
		name := all[i].Name
		env := map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_REDIS_ADDR": "127.0.0.1:1"}
		err := run(t.Context(), []string{tt.cmd, "--strategies", name}, func(k string) string { return env[k] }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "strategy "+name+" needs") {
			t.Errorf("%s --strategies %s without %s: err = %v, want it to say what is missing", tt.cmd, name, tt.need, err)
		}
	}
}

// TestBench runs a small bench on real servers, with the shop binary as
// its child processes, and checks the report it writes.
func TestBench(t *testing.T) {
	t.Parallel()
	redis := testinfra.Redis(t)
	zk, etcd := testinfra.ZooKeeper(t), testinfra.Etcd(t)
	dir := t.TempDir()
	jsonFile, htmlFile := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.html")
	args := []string{"bench", "--bin", shoptest.Bin(t), "--mysql", testinfra.MySQL(t), "--redis", redis.Addr,
		"--zk", strings.Join(zk.Addrs, ","), "--zk-root", zk.Root, "--etcd", strings.Join(etcd.Endpoints, ","), "--etcd-prefix", etcd.Prefix, "--stock", "10", "--buyers", "60", "--instances", "2",
		"--baseline", "200ms", "--rate", "40", "--duration", "500ms", "--closed", "500ms", "--closed-buyers", "8", "--closed-max-buyers", "16", "--json", jsonFile, "--html", htmlFile}
	var stdout strings.Builder
	// Buyer authentication and a buyer rate limit in the environment do not
	// reach the children: the bench's buyers carry no token.
	getenv := func(k string) string {
		return map[string]string{"SHOP_REDIS_PREFIX": redis.Prefix, "SHOP_BUYER_AUTH": "jwt",
			"SHOP_JWT_SECRET": strings.Repeat("s", 32), "SHOP_BUYER_RATE": "1/h"}[k]
	}
	if err := run(t.Context(), args, getenv, &stdout, io.Discard); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	// The buyers' Idempotency-Keys, and lua's state, went with the run.
	rdb := goredis.NewClient(&goredis.Options{Addr: redis.Addr})
	defer rdb.Close()
	if left, _, err := rdb.Scan(t.Context(), 0, redis.Prefix+"*", 1_000_000).Result(); err != nil || len(left) > 0 {
		t.Errorf("the bench left %d Redis keys under its prefix (%v), such as %q", len(left), err, left[:min(len(left), 3)])
	}

	var rep loadtest.Report
	data, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	var baselines []string
	for _, b := range rep.Baselines {
		baselines = append(baselines, b.Key)
		if b.Ordered == 0 || b.Errors != 0 {
			t.Errorf("baseline %s: %d operations, %d errors", b.Key, b.Ordered, b.Errors)
		}
		if b.Key == string(strategy.HTTPEcho) {
			checkCPU(t, b.Key, b.CPU, 2)
		}
	}
	want := []string{"http-echo", "http-echo-burst", "sql-atomic", "sql-for-update", "sql-batched", "redis-lua"}
	for _, s := range strategy.All() {
		if s.Lock != nil && !slices.Contains(s.Needs, backend.Redlock) { // no Redlock masters given
			want = append(want, string(strategy.Serial(s.Name)))
		}
	}
	if !slices.Equal(baselines, want) {
		t.Errorf("baselines %v, want %v", baselines, want)
	}
	for _, r := range rep.Results {
		if r.Skipped != "" {
			continue
		}
		if r.Burst == nil || r.Steady == nil || r.Closed == nil || r.Error != "" {
			t.Errorf("%s did not run: %s", r.Strategy, r.Error)
			continue
		}
		if s, _ := strategy.Lookup(r.Strategy); r.Baseline != string(s.Ceiling) || r.Fraction <= 0 || r.ClosedFraction <= 0 {
			t.Errorf("%s: ceiling %q, fractions %g and %g; want its own ceiling, %s, and both fractions", r.Strategy, r.Baseline, r.Fraction, r.ClosedFraction, s.Ceiling)
		}
		// The closed loop's search: 8 buyers, then 16 if nothing stopped
		// it, and the best of them reported.
		if n := len(r.ClosedSteps); n < 1 || n > 2 || r.ClosedSteps[0].Buyers != 8 ||
			!slices.ContainsFunc(r.ClosedSteps, func(st loadtest.ClosedStep) bool { return st.Buyers == r.ClosedBuyers }) {
			t.Errorf("%s: closed loop of %d buyers, steps %+v; want 8 buyers, then 16, and one of them", r.Strategy, r.ClosedBuyers, r.ClosedSteps)
		}
		if len(r.Usage) != 2 || r.Usage[0].PeakRSSBytes <= 0 || r.Usage[0].CPUSeconds <= 0 {
			t.Errorf("%s: usage %+v, want the peak RSS and CPU of 2 instances", r.Strategy, r.Usage)
		}
		checkCPU(t, r.Strategy, r.Closed.CPU, 2)
		if r.Strategy == "none" || r.Strategy == "local" {
			continue // unguarded across instances: they may oversell
		}
		for _, ph := range []*loadtest.Phase{r.Burst, r.Steady, r.Closed} {
			if ph.Audit.Oversold != 0 || ph.Audit.Undersold != 0 || len(ph.Problems) != 0 {
				t.Errorf("%s: audit %+v, problems %q", r.Strategy, ph.Audit, ph.Problems)
			}
		}
	}
	html, err := os.ReadFile(htmlFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "Oversold units", "Baselines", "Throughput", "Where each order's CPU goes"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the HTML report lacks %q", want)
		}
	}
	for _, want := range []string{"sql-for-update", "CPU per order"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the tables lack %q:\n%s", want, stdout.String())
		}
	}
}

// checkCPU: a closed loop's CPU per order has the shops' share, of every
// instance, and the load generator's; each server's is measured or says
// why not.
func checkCPU(t *testing.T, name string, classes []loadtest.ClassCPU, shops int) {
	t.Helper()
	got := map[string]loadtest.ClassCPU{}
	for _, c := range classes {
		got[c.Class] = c
		if c.Processes == 0 && c.Missing == "" {
			t.Errorf("%s: CPU of %s: no process measured, and no word why", name, c.Class)
		}
	}
	if c := got["shops"]; c.Processes != shops || c.PerOrder <= 0 {
		t.Errorf("%s: the shops' CPU %+v, want %d processes' and some per order", name, c, shops)
	}
	if c := got["load generator"]; c.Processes != 1 || c.PerOrder <= 0 {
		t.Errorf("%s: the load generator's CPU %+v, want this process's", name, c)
	}
}
