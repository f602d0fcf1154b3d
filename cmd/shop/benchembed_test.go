package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockguard/shop/loadtest"
)

// TestBenchZeroSetup: with no server named, bench runs on embedded
// servers, as demo does, skipping ZooKeeper's and etcd's strategies with
// the flag to name them, and its report says so on its first line and in
// the JSON's backends.
func TestBenchZeroSetup(t *testing.T) {
	t.Parallel()
	jsonFile := filepath.Join(t.TempDir(), "bench.json")
	var out strings.Builder
	err := run(t.Context(), []string{"bench", "--strategies", "", "--stock", "5", "--buyers", "10", "--instances", "1", "--json", jsonFile},
		func(string) string { return "" }, &out, &out)
	if err != nil {
		t.Fatalf("bench with no servers: %v\n%s", err, out.String())
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	if !strings.Contains(first, "embedded servers") || !strings.Contains(first, "not comparable") {
		t.Errorf("first line: %q, want it to say the servers are embedded and the figures not comparable", first)
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadtest.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var backends []string
	for _, b := range rep.Backends {
		backends = append(backends, b.Role+": "+b.What)
	}
	all := strings.Join(backends, "\n")
	for _, want := range []string{"database: SQLite", "redis: miniredis (embedded)", "shop: in this process, on embedded servers"} {
		if !strings.Contains(all, want) {
			t.Errorf("backends lack %q:\n%s", want, all)
		}
	}
	if rep.Kind != "bench" {
		t.Errorf("kind %q, want bench", rep.Kind)
	}
	ran := map[string]string{}
	for _, r := range rep.Results {
		ran[r.Strategy] = r.Skipped
	}
	if !strings.Contains(ran["zookeeper"], "--zk") || ran["atomic"] != "" || ran["lua"] != "" {
		t.Errorf("results: %v, want atomic and lua run and zookeeper skipped for want of --zk", ran)
	}
}
