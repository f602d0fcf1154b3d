package lesson_test

import (
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/lesson"
	"github.com/stockguard/shop/internal/testinfra"
)

// Each lesson runs on real servers. The test reads the stores itself,
// after the lesson, wherever the lesson leaves its data there; where it
// must clean up (a Redis key with no expiry), it checks the numbers the
// lesson read from Redis.

// audited reads the audit of one of the lesson's SKUs.
func audited(t *testing.T, env *lesson.Env, sale string) audit.Audit {
	t.Helper()
	a, err := audit.SKU(t.Context(), env.DB, env.Prefix+sale, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// verdict fails the test unless the lesson reproduced its failure and its
// fix held.
func verdict(t *testing.T, r lesson.Result) {
	t.Helper()
	if !r.Reproduced || !r.Held {
		t.Errorf("%s: reproduced %v, held %v; mistake %+v, fix %+v", r.Name, r.Reproduced, r.Held, r.Mistake, r.Fix)
	}
}

func TestOversell(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	verdict(t, run(t, env, "oversell"))
	if a := audited(t, env, "oversell-mistake"); a.Oversold == 0 {
		t.Errorf("read-then-write: %+v, want units oversold", a)
	}
	if a := audited(t, env, "oversell-fix"); a.Oversold != 0 || a.Orders != 5 || a.Available != 0 {
		t.Errorf("conditional UPDATE: %+v, want 5 orders and nothing left", a)
	}
}

func TestLocalLock(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	verdict(t, run(t, env, "local-lock"))
	if a := audited(t, env, "local-lock-1"); a.Oversold != 0 || a.Orders != 5 {
		t.Errorf("a mutex in 1 instance: %+v, want 5 orders", a)
	}
	if a := audited(t, env, "local-lock-3"); a.Oversold == 0 {
		t.Errorf("a mutex in each of 3 instances: %+v, want units oversold", a)
	}
	if a := audited(t, env, "local-lock-fix"); a.Oversold != 0 || a.Orders != 5 {
		t.Errorf("a Redis lock: %+v, want 5 orders", a)
	}
}

func TestSetNXExpire(t *testing.T) {
	t.Parallel()
	r := run(t, realEnv(t, 0), "setnx-expire")
	verdict(t, r)
	if m := r.Mistake.Numbers; m["pttl_ms_after_crash"] != -1 || m["taken_after_2_ttl"] != 0 {
		t.Errorf("SETNX then EXPIRE: %v, want a key with no expiry that nobody takes", m)
	}
	if f := r.Fix.Numbers; f["pttl_ms_after_crash"] <= 0 || f["taken_after_2_ttl"] != 1 {
		t.Errorf("SET NX PX: %v, want an expiring key, taken after its TTL", f)
	}
}

func TestUncheckedDelete(t *testing.T) {
	t.Parallel()
	r := run(t, realEnv(t, 0), "unchecked-delete")
	verdict(t, r)
	if m := r.Mistake.Numbers; m["key_after_a_release"] != 0 || m["c_got_in_while_b_held"] != 1 {
		t.Errorf("DEL: %v, want B's key deleted and C in", m)
	}
	if f := r.Fix.Numbers; f["key_after_a_release"] != 1 || f["c_got_in_while_b_held"] != 0 {
		t.Errorf("compare-and-delete: %v, want B's key kept and C out", f)
	}
}

func TestGetsetClock(t *testing.T) {
	t.Parallel()
	r := run(t, realEnv(t, 0), "getset-clock")
	verdict(t, r)
	if m := r.Mistake.Numbers; m["b_took_a_live_lock"] != 1 || m["b_lock_deleted_by_a"] != 1 {
		t.Errorf("GETSET on timestamps: %v, want B in and its lock deleted by A", m)
	}
	if f := r.Fix.Numbers; f["b_took_a_live_lock"] != 0 {
		t.Errorf("SET NX PX: %v, want B kept out", f)
	}
}

func TestPausedLease(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	r := run(t, env, "paused-lease")
	verdict(t, r)
	if a := audited(t, env, "paused-lease-mistake"); a.Orders != 2 || a.Oversold != 1 {
		t.Errorf("no fence: %+v, want 2 orders for the 1 unit", a)
	}
	if a := audited(t, env, "paused-lease-fix"); a.Orders != 1 || a.Oversold != 0 || r.Fix.Numbers["a_refused"] != 1 {
		t.Errorf("fenced: %+v, %v; want 1 order and A's write refused", a, r.Fix.Numbers)
	}
}

func TestDuplicateSubmit(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	verdict(t, run(t, env, "duplicate-submit"))
	if a := audited(t, env, "duplicate-submit-mistake"); a.Orders != 2 {
		t.Errorf("no key: %+v, want 2 orders", a)
	}
	if a := audited(t, env, "duplicate-submit-fix"); a.Orders != 1 {
		t.Errorf("one key: %+v, want 1 order", a)
	}
}

func TestDoubleRefund(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	verdict(t, run(t, env, "double-refund"))
	if a := audited(t, env, "double-refund-mistake"); a.Available != 2 {
		t.Errorf("read, then write: %+v, want the 1 unit returned twice", a)
	}
	if a := audited(t, env, "double-refund-fix"); a.Available != 1 || a.Orders != 0 {
		t.Errorf("conditional: %+v, want the unit returned once and no live order", a)
	}
}

func TestOptimisticCollapse(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	r := run(t, env, "optimistic-collapse")
	verdict(t, r)
	if a := audited(t, env, "optimistic-collapse-mistake"); a.Available == 0 || r.Mistake.Numbers["turned_away_busy"] == 0 {
		t.Errorf("3 tries: %+v, %v; want units left while buyers were turned away", a, r.Mistake.Numbers)
	}
	if a := audited(t, env, "optimistic-collapse-fix"); a.Available != 0 || a.Orders != 50 || a.Oversold != 0 {
		t.Errorf("the optimistic strategy: %+v, want all 50 units sold", a)
	}
}

func TestZKHerd(t *testing.T) {
	t.Parallel()
	r := run(t, realEnv(t, 0), "zk-herd")
	verdict(t, r)
	m, f := r.Mistake.Numbers, r.Fix.Numbers
	if m["releases"] != 8 || m["wakeups"] <= m["releases"] {
		t.Errorf("watching the children: %v, want more wake-ups than releases", m)
	}
	if f["releases"] != 8 || f["wakeups"] > f["releases"]-1 {
		t.Errorf("watching the predecessor: %v, want at most one wake-up per release", f)
	}
}

func TestRedlockFailover(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 3)
	r := run(t, env, "redlock-failover")
	verdict(t, r)
	for _, tr := range []*lesson.Trial{r.Mistake, r.Fix} {
		if tr.Numbers["holders_at_once"] != 2 {
			t.Errorf("%s: %v, want A and B holding the lock at once", tr.Name, tr.Numbers)
		}
	}
	if a := audited(t, env, "redlock-failover-mistake"); a.Orders != 2 || a.Oversold != 1 {
		t.Errorf("no fence: %+v, want 2 orders for the 1 unit", a)
	}
	if a := audited(t, env, "redlock-failover-fix"); a.Orders != 1 || r.Fix.Numbers["a_refused"] != 1 {
		t.Errorf("fenced: %+v, %v; want 1 order and A's write refused", a, r.Fix.Numbers)
	}
}

func TestFastPathCrash(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	r := run(t, env, "fast-path-crash")
	verdict(t, r)
	if a := audited(t, env, "fast-path-crash-mistake"); a.Orders >= int(r.Mistake.Numbers["acknowledged"]) {
		t.Errorf("the in-memory queue: %+v, %v; want fewer orders than buyers told they bought", a, r.Mistake.Numbers)
	}
	if a := audited(t, env, "fast-path-crash-fix"); a.Orders != 10 || a.Available != 0 || r.Fix.Numbers["redis_available"] != 0 {
		t.Errorf("lua: %+v, %v; want all 10 reservations persisted, Redis and the database at 0", a, r.Fix.Numbers)
	}
}

// TestLockOrder: locked in the order requested, both buyers wait for each
// other until their deadline, and are answered busy; in ascending order,
// both are served before it. How long the fix's buyers took is not
// checked: only that the deadline, which the mistake's wait out, did not
// end their turns.
func TestLockOrder(t *testing.T) {
	t.Parallel()
	r := run(t, realEnv(t, 0), "lock-order")
	verdict(t, r)
	m, f := r.Mistake.Numbers, r.Fix.Numbers
	if m["busy_answers"] != 2 || m["served"] != 0 || m["stock_left_a"] != 5 || m["stock_left_b"] != 5 || m["waited_ms"] < m["deadline_ms"] {
		t.Errorf("request order: %v, want both buyers busy at their deadline and the stock untouched", m)
	}
	if f["busy_answers"] != 0 || f["served"] != 2 || f["stock_left_a"] != 3 || f["stock_left_b"] != 3 {
		t.Errorf("ascending order: %v, want both buyers served within their deadline, one unit of each SKU per cart", f)
	}
}

func TestRestockRace(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	verdict(t, run(t, env, "restock-race"))
	for sale, available := range map[string]int{"restock-race-mistake": 15, "restock-race-delta": 25, "restock-race-expected": 25} {
		// Every unit is explained either way: the lost restock is a set
		// of +0 in the movements.
		if a := audited(t, env, sale); a.Available != available || a.Received != available || len(a.Violations()) > 0 {
			t.Errorf("%s: %+v, want %d available and received, and no violation", sale, a, available)
		}
	}
}

func TestAsyncFailover(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "the lesson starts MariaDB servers of its own")
	// The servers are the lesson's and gone after it: the test checks the
	// numbers it read from the promoted replica.
	r := run(t, &lesson.Env{Prefix: "async-failover-test:"}, "async-failover")
	verdict(t, r)
	if m := r.Mistake.Numbers; m["lost"] == 0 || m["oversold"] != m["lost"] || m["acknowledged"] != m["units"] {
		t.Errorf("asynchronous: %v; want every buyer given an order, some lost, and as many units sold again", m)
	}
	if f := r.Fix.Numbers; f["lost"] != 0 || f["oversold"] != 0 || f["acknowledged"]+f["sold_after_failover"] != f["units"] {
		t.Errorf("semi-synchronous: %v; want nothing lost, and every unit sold once", f)
	}
}

// TestStarvation: the three ways of waiting print in order, fixed
// interval, random wait, arrival queue; the fixed interval serves buyers
// out of turn and the queue does not.
func TestStarvation(t *testing.T) {
	t.Parallel()
	r := run(t, realEnv(t, 0), "starvation")
	verdict(t, r)
	var rows []string
	for _, tr := range []*lesson.Trial{r.Mistake, r.Fix} {
		rows = append(rows, tr.Rows...)
	}
	for i, want := range []string{"fixed interval", "random wait", "arrival queue"} {
		if i >= len(rows) || !strings.HasPrefix(rows[i], want) {
			t.Fatalf("rows %q: want %q at %d", rows, want, i)
		}
	}
	if m := r.Mistake.Numbers; m["fixed_overtakes_per_1000"] == 0 || m["fixed_latest_winner"] <= 10 {
		t.Errorf("fixed interval: %v, want later buyers winning over earlier ones", m)
	}
	if f := r.Fix.Numbers; f["queue_overtakes_per_1000"] != 0 || f["queue_first_come_x100"] < 80 || f["queue_latest_winner"] > 13 {
		t.Errorf("arrival queue: %v, want the first 10 buyers served, give or take those that came within 10 ms, and no overtake", f)
	}
}
