package sale_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/sale"
	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// TestDemoCartMix runs the demo with a cart mix, as `shop demo --cart 3`
// does, on the embedded backends, for every strategy that guards the
// stock on two instances: every order of the burst, of a steady load and
// of a closed loop is a cart of 2 or 3 of 3 SKUs. Every SKU must be
// audited clean, none oversold or undersold and no order partial, and
// each 201 must be one order of its cart's lines.
func TestDemoCartMix(t *testing.T) {
	t.Parallel()
	testCartMix(t, false, func(t *testing.T) map[string]string { return nil })
}

// TestDemoCartMixOnRealServers runs the same sales on MySQL, Redis,
// ZooKeeper and etcd, every guarded strategy.
func TestDemoCartMixOnRealServers(t *testing.T) {
	t.Parallel()
	testCartMix(t, true, realServers)
}

// The burst is 50 carts for 10 units of each SKU: it sells each SKU out,
// and keeps the queue of carts within the buyers' deadline on a loaded
// machine. 100 carts for 20 units each queued past it at a load average
// of 18, under redlock, on the embedded servers: 100 answered 503 at the
// deadline, none sold.
func testCartMix(t *testing.T, servers bool, env func(t *testing.T) map[string]string) {
	const cart, stock = 3, 10
	for _, s := range strategy.All() {
		unembedded := s.Embedded.Skip != "" || slices.Contains(s.Needs, backend.ZooKeeper) || slices.Contains(s.Needs, backend.Etcd)
		if min, ok := oversells[s.Name]; ok && min <= 2 || !servers && unembedded {
			continue // not guarded on 2 instances, or not run on embedded backends
		}
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			rep, err := sale.Demo{
				Plan: loadtest.Plan{Strategies: []string{s.Name}, Instances: 2, Stock: stock,
					Burst:  loadtest.Burst{Buyers: 50, Cart: cart},
					Steady: loadtest.Steady{Rate: 100, Duration: 300 * time.Millisecond, Cart: cart},
					Closed: loadtest.Closed{Buyers: 4, Duration: 300 * time.Millisecond, Cart: cart}},
				Config: demoConfig(t, env(t)),
			}.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			r := rep.Results[0]
			if r.Verdict() != "PASS" || r.Burst == nil || r.Steady == nil || r.Closed == nil || r.ClosedCart == nil {
				t.Fatalf("verdict %s, error %q, problems %q", r.Verdict(), r.Error, problems(r))
			}
			for load, p := range map[string]*loadtest.Phase{"burst": r.Burst, "steady": r.Steady, "carts": r.ClosedCart} {
				checkCartMix(t, load, p, cart)
			}
			// The closed loop places single orders, beside which the
			// cart mix's is a fraction.
			if i := slices.IndexFunc(r.Closed.Acked, func(o audit.Acked) bool { return len(o.SKUs) != 1 }); i >= 0 || r.Closed.Ordered == 0 {
				t.Errorf("closed: %d orders, order %d not of one line; want single orders", r.Closed.Ordered, i)
			}
			if want := r.ClosedCart.OrdersPerSecond() / r.Closed.OrdersPerSecond(); r.ClosedCartFraction != want || want <= 0 {
				t.Errorf("cart fraction %g, want %g", r.ClosedCartFraction, want)
			}
			if soldOut := slices.ContainsFunc(r.Burst.SKUs, func(a audit.Audit) bool { return a.Available == 0 }); !soldOut || r.Burst.SoldOut == 0 {
				t.Errorf("burst: no SKU sold out (%+v), %d sold-out answers; want one at least", r.Burst.SKUs, r.Burst.SoldOut)
			}
		})
	}
}

// checkCartMix checks a load with a cart mix of up to cart lines: each of
// its SKUs audited, and every 201 one order in the database, of 2 to cart
// lines whose units the SKUs' audits add up to.
func checkCartMix(t *testing.T, load string, p *loadtest.Phase, cart int) {
	t.Helper()
	if len(p.SKUs) != max(cart, 3) {
		t.Fatalf("%s: %d SKUs audited, want %d", load, len(p.SKUs), max(cart, 3))
	}
	if want := loadtest.HotSKUs(p.SKUs[0].SKU, cart); !slices.Equal(skuNames(p.SKUs), want) {
		t.Errorf("%s: SKUs %q, want %q", load, skuNames(p.SKUs), want)
	}
	lines := 0
	for _, o := range p.Acked {
		if len(o.SKUs) < 2 || len(o.SKUs) > cart {
			t.Errorf("%s: order %d of %d lines, want 2 to %d", load, o.ID, len(o.SKUs), cart)
		}
		lines += len(o.SKUs)
	}
	if a := p.Audit; a.Orders != p.Ordered || a.Sold != lines || a.Partial != 0 || a.MissingLines != 0 {
		t.Errorf("%s: the database holds %d orders of %d units, %d partial, %d lines missing; the buyers were answered %d orders of %d lines",
			load, a.Orders, a.Sold, a.Partial, a.MissingLines, p.Ordered, lines)
	}
}

func skuNames(audits []audit.Audit) []string {
	var names []string
	for _, a := range audits {
		names = append(names, a.SKU)
	}
	return names
}

func problems(r loadtest.Result) []string {
	var all []string
	for _, p := range []*loadtest.Phase{r.Burst, r.Steady, r.Closed, r.ClosedCart} {
		if p != nil {
			all = append(all, p.Problems...)
		}
	}
	return all
}
