package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

// TestLoadAgainstServe: shop load against three `shop serve` processes
// that it did not start, whose buyers authenticate with tokens it mints:
// a burst, a steady load and a closed loop, each audited clean through
// the API and in the database, with the same figures as the database
// holds; a second run on the same SKUs is refused before it sends a
// buyer; and without the database, the audit through the API is the
// load's, as the database has it.
func TestLoadAgainstServe(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "three shop processes share one MySQL and one Redis")
	dsn, r := testinfra.MySQL(t), testinfra.Redis(t)
	secret := strings.Repeat("k", 32)
	env := []string{"SHOP_MYSQL_DSN=" + dsn, "SHOP_REDIS_ADDR=" + r.Addr, "SHOP_REDIS_PREFIX=" + r.Prefix, "SHOP_STRATEGY=atomic",
		"SHOP_ADMIN_TOKEN=admin", "SHOP_BUYER_AUTH=jwt", "SHOP_JWT_SECRET=" + secret, "SHOP_JWT_ISSUER=stockguard-test"}
	var targets []string
	for range 3 {
		base, _ := shoptest.Start(t, env...)
		targets = append(targets, base)
	}
	jsonFile := filepath.Join(t.TempDir(), "load.json")
	args := []string{"load", "--target", strings.Join(targets, ","), "--admin-token", "admin", "--sku", "flash", "--stock", "100", "--buyers", "400",
		"--rate", "200", "--duration", "500ms", "--closed", "300ms", "--closed-buyers", "4", "--closed-max-buyers", "4", "--mysql", dsn, "--json", jsonFile}
	getenv := func(k string) string {
		return map[string]string{"SHOP_JWT_SECRET": secret, "SHOP_JWT_ISSUER": "stockguard-test"}[k]
	}
	var stdout strings.Builder
	if err := run(t.Context(), args, getenv, &stdout, io.Discard); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	data, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadtest.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || rep.Kind != "load" || rep.Results[0].Instances != 3 {
		t.Fatalf("report of kind %q, %d results; want one load of 3 instances:\n%s", rep.Kind, len(rep.Results), stdout.String())
	}
	res := rep.Results[0]
	gdb := testinfra.ShopDB(t, dsn)
	for sku, ph := range map[string]*loadtest.Phase{"flash-burst": res.Burst, "flash-steady": res.Steady, "flash-closed-4": res.Closed} {
		if ph == nil || ph.API == nil {
			t.Errorf("%s: no load, or no audit through the API: %+v", sku, ph)
			continue
		}
		if len(ph.Problems) > 0 || ph.Errors > 0 || ph.Audit.Oversold != 0 || ph.API.Oversold != 0 {
			t.Errorf("%s: problems %q, %d errors, oversold %d (database) and %d (API)", sku, ph.Problems, ph.Errors, ph.Audit.Oversold, ph.API.Oversold)
		}
		// The database, read again now, says what both audits said.
		db, err := audit.SKU(t.Context(), gdb, sku, ph.SoldOut, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []audit.Audit{ph.Audit, *ph.API} {
			if a.SKU != sku || a.Initial != db.Initial || a.Available != db.Available || a.Sold != db.Sold || a.Orders != db.Orders ||
				a.Undersold != db.Undersold || a.Drift != 0 || a.LostAcks != 0 {
				t.Errorf("%s: audit %+v, the database says %+v", sku, a, db)
			}
		}
		if db.Orders != ph.Ordered {
			t.Errorf("%s: %d orders in the database, %d answered 201", sku, db.Orders, ph.Ordered)
		}
	}
	if res.Burst != nil && (res.Burst.Audit.Sold != 100 || res.Burst.Audit.Available != 0) {
		t.Errorf("the burst sold %d of 100 units, %d left; 400 buyers should sell them all", res.Burst.Audit.Sold, res.Burst.Audit.Available)
	}
	for _, want := range []string{"audit through the API", "deployment", "PASS"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout.String())
		}
	}

	err = run(t.Context(), args, getenv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "SKU flash-burst is on sale already") {
		t.Errorf("a second run on the same SKUs: err = %v, want it refused", err)
	}

	// Without --mysql, the audit through the API is the load's.
	args = []string{"load", "--target", strings.Join(targets, ","), "--admin-token", "admin", "--sku", "api", "--stock", "20", "--buyers", "60", "--json", jsonFile}
	if err := run(t.Context(), args, getenv, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if data, err = os.ReadFile(jsonFile); err != nil {
		t.Fatal(err)
	}
	rep = loadtest.Report{}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	ph := rep.Results[0].Burst
	db, err := audit.SKU(t.Context(), gdb, "api-burst", ph.SoldOut, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := ph.Audit; ph.API != nil || len(ph.Problems) > 0 || a.Initial != 20 || a.Sold != db.Sold || a.Available != db.Available || a.Orders != db.Orders {
		t.Errorf("without the database: audit %+v (API %v), problems %q; the database says %+v", a, ph.API, ph.Problems, db)
	}
}

// TestLoadRefusesUnready: shop load asks every target's /readyz first, and
// refuses a target that does not answer, or answers other than 200, with
// an error that names it and what it answered, having sent nothing to
// the others.
func TestLoadRefusesUnready(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sent []string
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer ready.Close()
	unready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"status":"unavailable","error":"mysql: connection refused"}`, http.StatusServiceUnavailable)
	}))
	defer unready.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	for _, tt := range []struct {
		target string
		want   []string
	}{
		{closed, []string{closed + " is not ready", "connection refused"}},
		{unready.URL, []string{unready.URL + " is not ready", "503 Service Unavailable", "mysql: connection refused"}},
	} {
		args := []string{"load", "--target", ready.URL + "," + tt.target, "--admin-token", "admin", "--sku", "flash", "--stock", "10", "--buyers", "20"}
		err := run(t.Context(), args, func(string) string { return "" }, io.Discard, io.Discard)
		for _, want := range tt.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("target %s: err = %v, want it to say %q", tt.target, err, want)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, req := range sent {
		if req != "GET /readyz" {
			t.Errorf("the ready target was sent %s, want nothing but GET /readyz", req)
		}
	}
}

// TestLoadCommandFlagErrors: shop load refuses missing or bad flags before it
// sends anything, with an error that says what is wrong.
func TestLoadCommandFlagErrors(t *testing.T) {
	t.Parallel()
	ok := []string{"--target", "http://127.0.0.1:1", "--admin-token", "admin", "--sku", "flash"}
	without := func(flag string) []string {
		var args []string
		for i := 0; i < len(ok); i += 2 {
			if ok[i] != flag {
				args = append(args, ok[i], ok[i+1])
			}
		}
		return args
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no target", without("--target"), "--target is required"},
		{"bad URL", append(without("--target"), "--target", "shop-1:8080"), `--target "shop-1:8080": want a base URL such as http://shop-1:8080`},
		{"URL with a path", append(without("--target"), "--target", "http://a:8080,http://b:8080/api"), `--target "http://b:8080/api"`},
		{"no admin token", without("--admin-token"), "--admin-token is required"},
		{"no sku", without("--sku"), "--sku is required"},
		{"no stock", append(ok, "--stock", "0"), "stock must be at least 1 unit"},
		{"no buyers", append(ok, "--buyers", "0"), "--buyers must be at least 1, not 0"},
		{"fewer buyers than stock", append(ok, "--stock", "10", "--buyers", "9"), "buyers (9) must be at least the stock (10)"},
		{"stray argument", append(ok, "now"), `unexpected argument "now"`},
		{"no token file", append(ok, "--tokens", filepath.Join(t.TempDir(), "none")), "--tokens: open"},
		{"short secret", append(ok, "--jwt-secret", "short"), "SHOP_JWT_SECRET: buyer: the HS256 secret has 5 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := run(t.Context(), append([]string{"load"}, tt.args...), func(string) string { return "" }, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}
