package lesson_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/lincheck"
)

// TestLinearizability checks the histories that the lesson wrote again,
// here: local's is rejected, with the first impossible answer the lesson
// printed, and atomic's is accepted. The final state each ends with is
// what the database has, and each page was written.
func TestLinearizability(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	env.Dir = t.TempDir()
	r := run(t, env, "linearizability")
	verdict(t, r)
	for _, tc := range []struct {
		strategy     string
		linearizable bool
	}{{"local", false}, {"atomic", true}} {
		ops, err := history.ReadFile(filepath.Join(env.Dir, tc.strategy+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		v := lincheck.Check(ops, time.Minute)
		if v.Unknown || v.Linearizable != tc.linearizable {
			t.Errorf("%s: %s; want linearizable %v", tc.strategy, v, tc.linearizable)
		}
		if !tc.linearizable && !slices.Contains(r.Mistake.Rows, "first impossible answer: "+v.FirstViolation) {
			t.Errorf("%s: rows %q lack the first impossible answer %q", tc.strategy, r.Mistake.Rows, v.FirstViolation)
		}
		final := ops[len(ops)-1].Final
		if final == nil || len(final.Stock) != 1 {
			t.Fatalf("%s: the history ends with %+v, not the final state of one SKU", tc.strategy, ops[len(ops)-1])
		}
		a, err := audit.SKU(t.Context(), env.DB, final.Stock[0].SKU, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.Available != final.Stock[0].Available || a.Orders != len(final.Orders) {
			t.Errorf("%s: the database has %+v, the history's final state %+v", tc.strategy, a, final)
		}
		if tc.linearizable && (a.Orders != 20 || a.Oversold != 0 || a.Available != 0) {
			t.Errorf("%s: %+v, want all 20 units sold once", tc.strategy, a)
		}
		if page, err := os.Stat(filepath.Join(env.Dir, tc.strategy+".html")); err != nil || page.Size() == 0 {
			t.Errorf("%s: the page: %v", tc.strategy, err)
		}
	}
}
