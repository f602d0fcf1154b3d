package fault

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/testinfra"
)

// The MySQL failover test sells on three `shop serve` processes over a
// MariaDB primary and its semi-synchronous (AFTER_SYNC) replica, behind
// an endpoint, the shops logged in as a user that read_only binds, and
// fails the primary mid-burst: by SIGKILL, with the replica's applier
// lagging, when the replica applies what it received, takes writes, and
// the endpoint moves to it, closing what it carried; or by a planned
// switchover, when the primary turns read-only and keeps running, and
// the connections already open stay on it. Once it is over, every
// acknowledged order replays with its key, nothing is oversold or left
// unsold, no 5xx but 503 was answered, and, right after the switchover,
// the same processes sell a new SKU exactly: none reads the old primary,
// which lacks it.

// TestFaultMySQLFailover runs the strategies through both faults, on one
// pair, one strategy after another.
func TestFaultMySQLFailover(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	pair := testinfra.StartMySQLPair(t, true)
	redisAddr := testinfra.StartRedis(t).Addr() // each strategy keys its own prefix
	for _, strategy := range []string{"atomic", "batched", "lua", "redis"} {
		t.Run(strategy, func(t *testing.T) {
			pair.Restore() // a replica again, whatever an earlier subtest left
			dsn := pair.DSN(t)
			gdb := testinfra.ShopDB(t, dsn)
			followEndpoint(t, gdb)
			s := startSale(t, strategy, dsn, gdb, redisAddr, nil)
			s.mysqlFailover(t, pair, "mfo-"+strategy+"-kill", pair.KillPrimaryAndPromote)
			pair.Restore()
			old, ok := s.mysqlFailover(t, pair, "mfo-"+strategy+"-switchover", pair.Switchover)
			s.sellExactly(t, "mfo-"+strategy+"-after")
			s.awayFrom(t, pair, old, "mfo-"+strategy+"-after", ok)
		})
	}
}

// followEndpoint makes the test's own reads of gdb dial the endpoint
// afresh each time, so that they reach the primary of the moment.
func followEndpoint(t *testing.T, gdb *gorm.DB) {
	t.Helper()
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxIdleConns(0)
}

// mysqlFailover sells sku and runs fault, which returns the old
// primary's address, mid-burst, then checks what the buyers were told
// and what the database holds. It returns the old primary's address, and
// when the new one took writes.
func (s *faultSale) mysqlFailover(t *testing.T, pair *testinfra.MySQLPair, sku string, fault func() string) (old string, ok time.Time) {
	t.Helper()
	s.shape = &failoverShape
	res := s.outage(t, sku, func() {
		start := time.Now()
		pair.Lag() // a kill finds acknowledged writes not yet applied
		time.Sleep(failoverLag)
		old = fault()
		ok = time.Now()
		t.Logf("the primary %s failed over to %s in %v", old, pair.Primary(), ok.Sub(start).Round(time.Millisecond))
	})
	t.Logf("%s: %d answered 503, no sale for %v, %d of %d acknowledged orders lost", sku, res.unavailable, res.longestWithoutSales(), len(res.acked)-s.orders(t, sku), len(res.acked))
	return old, ok
}

// awayFrom checks that, from 5 seconds after the switchover that ended at
// ok, no shop uses a connection to the old primary: while each shop
// changes sku's stock and reads it every 200 ms for 3 seconds, none of
// the shops' connections there runs anything. A connection left idle
// there may stay open; it is checked before it serves again.
func (s *faultSale) awayFrom(t *testing.T, pair *testinfra.MySQLPair, old, sku string, ok time.Time) {
	t.Helper()
	time.Sleep(time.Until(ok.Add(5 * time.Second)))
	client := s.Rec.Client()
	set := history.Op{Client: client, Kind: history.StockSet, Items: []history.Item{{SKU: sku, Quantity: 0}}}
	read := history.Op{Client: client, Kind: history.StockRead, Items: []history.Item{{SKU: sku}}}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, shop := range s.Shops {
			if r := s.sendStock(t, shop.Base, set); r.Code != http.StatusOK {
				t.Errorf("put stock %s after the switchover: %d %s", sku, r.Code, r.Body)
			}
			if r := s.sendStock(t, shop.Base, read); r.Code != http.StatusOK {
				t.Errorf("get stock %s after the switchover: %d %s", sku, r.Code, r.Body)
			}
		}
	}
	s.CheckHistory(t, sku) // again, with the stock's sets and reads
	// The process list counts whole seconds: a connection that served
	// in the last 2 seconds shows less than 2.
	for _, c := range pair.ShopConnections(old) {
		var id, seconds int
		var command string
		if _, err := fmt.Sscan(c, &id, &command, &seconds); err != nil || command != "Sleep" || seconds < 2 {
			t.Errorf("a shop used its connection to the old primary %s while it sold from the new one: %q", old, c)
		}
	}
}

// orders counts the orders of sku in the database.
func (s *faultSale) orders(t *testing.T, sku string) int {
	t.Helper()
	var n int64
	if err := s.GDB.Table("orders").Where("sku = ?", sku).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return int(n)
}
