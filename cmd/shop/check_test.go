package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/loadtest"
)

// TestCheckCommand: shop demo --history writes a sale's history, which
// shop check finds linearizable, with its page beside it; the same
// history with one acknowledged order taken out of the final state is
// rejected, the buyer named, and the command fails.
func TestCheckCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "demo.json")
	var out strings.Builder
	noEnv := func(string) string { return "" }
	err := run(t.Context(), []string{"demo", "--strategies", "atomic", "--stock", "20", "--buyers", "200", "--history", dir, "--json", jsonFile}, noEnv, &out, &out)
	if err != nil {
		t.Fatalf("shop demo --history: %v\n%s", err, out.String())
	}
	var rep loadtest.Report
	if b, err := os.ReadFile(jsonFile); err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("the demo's JSON: %v", err)
	}
	if h := rep.Results[0].Burst.History; h == nil || !h.Linearizable || h.Ops < 201 {
		t.Fatalf("the demo's JSON says of the history: %+v; want linearizable, of 200 orders and more", h)
	}
	file := filepath.Join(dir, "atomic.jsonl")
	out.Reset()
	if err := run(t.Context(), []string{"check", dir}, noEnv, &out, &out); err != nil {
		t.Fatalf("shop check of the demo's history: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "atomic.jsonl: linearizable") {
		t.Errorf("shop check printed %q", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "atomic.html")); err != nil {
		t.Errorf("no page beside the history: %v", err)
	}

	ops, err := history.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	final := ops[len(ops)-1].Final
	lost := final.Orders[0]
	final.Orders = final.Orders[1:]
	final.Stock[0].Available += lost.Items[0].Quantity
	broken := filepath.Join(t.TempDir(), "lost.jsonl")
	if err := history.WriteFile(broken, ops); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(t.Context(), []string{"check", broken}, noEnv, &out, &out)
	if err == nil || !strings.Contains(out.String(), "NOT linearizable") || !strings.Contains(out.String(), lost.User) {
		t.Errorf("shop check of a history that lost order %d of %s: error %v, printed %q; want it rejected, naming the buyer",
			lost.ID, lost.User, err, out.String())
	}
}

// TestCheckCommandErrors: what shop check is not given, it says.
func TestCheckCommandErrors(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"op\":\"order\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "name a history"},
		{[]string{empty}, "has no history"},
		{[]string{filepath.Join(empty, "nosuch.jsonl")}, "no such file"},
		{[]string{bad}, "line 2"},
		{[]string{"--html", "x.html", bad, bad}, "--html"},
	} {
		var out strings.Builder
		err := run(t.Context(), append([]string{"check"}, tc.args...), func(string) string { return "" }, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("shop check %q: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
