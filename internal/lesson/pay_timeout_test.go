package lesson_test

import "testing"

func TestPayVsTimeout(t *testing.T) {
	t.Parallel()
	env := realEnv(t, 0)
	r := run(t, env, "pay-vs-timeout")
	verdict(t, r)
	if a := audited(t, env, "pay-vs-timeout-mistake"); a.PaidAndReturned != 10 || a.Oversold != 5 || a.Drift != 5 {
		t.Errorf("read, then write: %+v, want all 10 paid and restocked, and the 5 paid last oversold once resold", a)
	}
	a := audited(t, env, "pay-vs-timeout-fix")
	if v := a.Violations(); len(v) > 0 || a.Orders != 10 || a.Available != 0 || a.Pending != 0 {
		t.Errorf("conditional: %+v, %v; want 10 live orders, every unit sold and none pending", a, v)
	}
	if f := r.Fix.Numbers; f["paid_orders"] != 10 || f["orphaned_payments"] != f["resold"] || f["resold"] == 0 {
		t.Errorf("conditional: %v, want 10 paid orders, a payment orphaned for each unit resold, and some resold", f)
	}
}
