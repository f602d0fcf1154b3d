package sale_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/sale"
	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

// TestDemoAbandonedCarts runs the demo's abandoned-cart sale on the
// embedded backends, for every strategy that guards the stock there: 30%
// of the first winners never pay, and the sale must still end with every
// unit paid, their units having expired and sold again to buyers who kept
// trying, with the audit clean.
func TestDemoAbandonedCarts(t *testing.T) {
	t.Parallel()
	testCarts(t, false, func(t *testing.T) map[string]string { return nil })
}

// TestDemoAbandonedCartsOnRealServers runs the same sales on MySQL, Redis,
// ZooKeeper and etcd, every guarded strategy.
func TestDemoAbandonedCartsOnRealServers(t *testing.T) {
	t.Parallel()
	testCarts(t, true, realServers)
}

// realServers are the settings of a sale on MySQL, Redis, ZooKeeper and
// etcd, each in a namespace of the test's own.
func realServers(t *testing.T) map[string]string {
	redis, etcd := testinfra.Redis(t), testinfra.Etcd(t)
	return map[string]string{"SHOP_MYSQL_DSN": testinfra.MySQL(t), "SHOP_REDIS_ADDR": redis.Addr, "SHOP_REDIS_PREFIX": redis.Prefix,
		"SHOP_ZK_ADDRS": strings.Join(testinfra.ZooKeeper(t).Addrs, ","), "SHOP_ETCD_ADDRS": strings.Join(etcd.Endpoints, ","),
		"SHOP_ETCD_PREFIX": etcd.Prefix}
}

// testCarts runs an abandoned-cart sale of each strategy that guards the
// stock on two instances, in parallel, each on the servers env names, or
// (servers false) on embedded ones where it can run there.
func testCarts(t *testing.T, servers bool, env func(t *testing.T) map[string]string) {
	const stock, unpaid, window = 20, 0.3, time.Second
	for _, s := range strategy.All() {
		unembedded := s.Embedded.Skip != "" || slices.Contains(s.Needs, backend.ZooKeeper) || slices.Contains(s.Needs, backend.Etcd)
		if min, ok := oversells[s.Name]; ok && min <= 2 || !servers && unembedded {
			continue // not guarded on 2 instances, or not run on embedded backends
		}
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			e := env(t)
			if e == nil {
				e = map[string]string{}
			}
			e["SHOP_EXPIRY_INTERVAL"] = "200ms"
			rep, err := sale.Demo{
				Plan: loadtest.Plan{Strategies: []string{s.Name}, Instances: 2, Stock: stock, Burst: loadtest.Burst{Buyers: 100},
					PaymentWindow: window, Unpaid: unpaid},
				Config: demoConfig(t, e),
			}.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			r := rep.Results[0]
			if r.Burst == nil || r.Burst.Carts == nil {
				t.Fatalf("no abandoned-cart sale: %s", r.Error)
			}
			checkCarts(t, r, stock, int(stock*unpaid), window)
		})
	}
}

// checkCarts checks what the database says of r's abandoned-cart sale of
// stock units, in which abandoned winners never paid.
func checkCarts(t *testing.T, r loadtest.Result, stock, abandoned int, window time.Duration) {
	t.Helper()
	a, c := r.Burst.Audit, r.Burst.Carts
	if r.Verdict() != "PASS" || a.Sold != stock || a.Pending != 0 || a.Oversold != 0 || a.Undersold != 0 {
		t.Errorf("verdict %s, problems %q; sold %d, pending %d, oversold %d, undersold %d; want PASS, %d sold and paid",
			r.Verdict(), r.Burst.Problems, a.Sold, a.Pending, a.Oversold, a.Undersold, stock)
	}
	// A payment late on a loaded machine expires its order too.
	if c.Abandoned != abandoned || c.Paid != stock || c.Expired != abandoned+c.Late || c.Resold != c.Expired {
		t.Errorf("abandoned %d, paid %d, expired %d, resold %d, late payments %d; want %d, %d, %d, %[8]d",
			c.Abandoned, c.Paid, c.Expired, c.Resold, c.Late, abandoned, stock, abandoned+c.Late)
	}
	// The abandoned units come back only once their window has passed.
	if c.AllPaid < window.Seconds() {
		t.Errorf("every unit paid %.2fs after the release (0: never), want after the %s window", c.AllPaid, window)
	}
	if len(c.Timeline) < 2 {
		t.Fatalf("a timeline of %d samples", len(c.Timeline))
	}
	// The abandoned orders are all held at once unless a loaded machine
	// placed them further apart than the window: then the first expired
	// before the last was placed.
	first, last := c.Timeline[0], c.Timeline[len(c.Timeline)-1]
	if first.Paid >= stock || last.Paid != stock || c.HeldPeak < 1 {
		t.Errorf("the timeline's paid went from %d to %d, held peaked at %d; want below %d, then %d, and some held",
			first.Paid, last.Paid, c.HeldPeak, stock, stock)
	}
}
