package fault

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// The failover tests sell on three `shop serve` processes over a Redis
// Cluster of three masters, each with a replica, and fail the master that
// holds the sale's keys mid-burst: by SIGKILL, when its replica,
// promoted, may lack the master's last writes (replication is
// asynchronous), or by CLUSTER FAILOVER, a graceful handover. The shops
// follow the new master by themselves. Once it is over, every
// acknowledged order replays with its key within SHOP_CLAIM_IDLE plus 5
// s, nothing is oversold or left unsold, no 5xx but 503 was answered, and
// the same processes sell a new SKU exactly.

// failoverShape is a failover test's burst: many buyers for few units,
// over a second, with the fault once a tenth of the units are sold, so
// that most of the sale is sold after it, from the promoted replica.
var failoverShape = burstShape{units: 50, buyers: 600, arrival: 2 * time.Millisecond, faultAt: 5}

// failoverLag is how long the replica falls behind before its master is
// killed: the writes it misses, which its master had acknowledged.
const failoverLag = 50 * time.Millisecond

// failoverClaimIdle is SHOP_CLAIM_IDLE in the fault tests' shops.
const failoverClaimIdle = 3 * time.Second

// TestFaultRedisFailover runs each Redis-using strategy through both
// failovers, on one cluster, one strategy after another.
func TestFaultRedisFailover(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	c := testinfra.StartReplicatedRedisCluster(t)
	for _, tc := range []struct {
		name, strategy string
		buckets        int
	}{{"lua", "lua", 0}, {"lua-buckets", "lua", 3}, {"batched", "batched", 0}, {"atomic", "atomic", 0}, {"redis", "redis", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.buckets > 0 {
				env = append(env, fmt.Sprint("SHOP_SKU_BUCKETS=", tc.buckets))
			}
			s := newSale(t, tc.strategy, strings.Join(c.Seeds, ","), env...)
			s.buckets = tc.buckets
			for _, how := range []string{"kill", "failover"} {
				s.failOver(t, c, fmt.Sprintf("fo-%s-%s", tc.name, how), how)
				c.Restore()
			}
			s.sellExactly(t, "fo-"+tc.name+"-after")
		})
	}
}

// failingRedis is a Redis whose masters a failover test fails: a Redis
// Cluster (testinfra.RedisCluster) or a master under Sentinel
// (testinfra.RedisSentinel).
type failingRedis interface {
	MasterOf(key string) string
	Lag(master string)
	Kill(master string) (promoted string)
	Failover(master string) (promoted string)
}

// failOver sells sku and fails its master mid-burst, how says how, then
// checks what the buyers were told and what the database holds.
func (s *faultSale) failOver(t *testing.T, c failingRedis, sku, how string) {
	t.Helper()
	s.shape = &failoverShape
	master := c.MasterOf("{" + sku + "}") // lua's keys of sku
	if s.Strategy != "lua" {
		master = c.MasterOf("{" + stock.LockName(sku) + "}") // the redis lock's
	}
	s.outage(t, sku, func() {
		start := time.Now()
		if how == "kill" {
			c.Lag(master)
			time.Sleep(failoverLag)
			unready := s.watchReady(t, func() { c.Kill(master) })
			if !unready {
				t.Errorf("/readyz answered 200 throughout the outage")
			}
		} else {
			c.Failover(master)
		}
		t.Logf("%s of %s, the master of %s: Redis had a master again after %v", how, master, sku, time.Since(start).Round(time.Millisecond))
	})
}

// outage sells sku and runs fault mid-burst, which returns once the
// servers serve again; then it checks what the buyers were told and what
// the database holds, and returns what the buyers were told.
func (s *faultSale) outage(t *testing.T, sku string, fault func()) told {
	t.Helper()
	done := make(chan struct{})
	began := time.Now()
	var ok time.Time // when the servers served again
	res := s.burst(t, sku, func() {
		defer close(done)
		fault()
		ok = time.Now()
	})
	<-done
	t.Logf("%d acknowledged, %d told sold out, %d answers 5xx; %d of %d buyers (%.1f%%) answered 503 at least once; %v without sales; the burst took %v",
		len(res.acked), res.soldOut, res.unavailable, res.busyBuyers, s.burstShape().buyers, 100*float64(res.busyBuyers)/float64(s.burstShape().buyers),
		res.longestWithoutSales().Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if res.gateway > 0 {
		t.Errorf("%d answers were 5xx other than 503", res.gateway)
	}
	// The shops sell again within SHOP_CLAIM_IDLE plus 5 s of the servers
	// serving again (SHOP_LOCK_TTL, when a test sets it longer: lockTTL):
	// a buyer is answered 201 or sold out by then. Buyers
	// queued behind a lock may be answered 503 for longer, at the pace at
	// which a loaded machine drains the queue, and retry: every buyer's
	// final answer within the burst's 90 s is checked by buy. And every
	// acknowledged order replays within as long.
	recovery := max(failoverClaimIdle, s.lockTTL) + 5*time.Second
	if next, after := res.finalAfter(ok); after && next.After(ok.Add(recovery)) {
		t.Errorf("no buyer was answered 201 or sold out for %v after the servers served again", next.Sub(ok).Round(time.Millisecond))
	}
	replayed := time.Now()
	s.replayBy(t, sku, res, replayed.Add(recovery))
	t.Logf("every acknowledged order replayed in %v", time.Since(replayed).Round(time.Millisecond))
	a := s.recovered(t, sku, res)
	if v := a.Violations(); len(v) > 0 {
		t.Errorf("invariants broken: %v", v)
	}
	if a.Orders != len(res.acked) || a.Available != 0 {
		t.Errorf("%d orders, %d acknowledged, %d units left; want every unit sold and acknowledged", a.Orders, len(res.acked), a.Available)
	}
	return res
}

// watchReady runs outage while it asks the first shop's /readyz every 50
// ms, and reports whether it was ever answered other than 200. Once
// outage returns, /readyz must answer 200 again within 5 seconds.
func (s *faultSale) watchReady(t *testing.T, outage func()) (unready bool) {
	t.Helper()
	ready := func() bool {
		r, err := http.Get(s.Shops[0].Base + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	}
	done := make(chan struct{})
	var seen atomic.Bool
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
				if !ready() {
					seen.Store(true)
				}
			}
		}
	}()
	outage()
	close(done)
	for end := time.Now().Add(5 * time.Second); !ready(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Errorf("/readyz not 200 within 5s of the cluster being ok again")
			break
		}
	}
	return seen.Load()
}

// replayBy retries every acknowledged order's request with its key, as a
// buyer whose answer was lost would, until it is answered its order, and
// fails the test for each that is not by deadline.
func (s *faultSale) replayBy(t *testing.T, sku string, res told, deadline time.Time) {
	t.Helper()
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var wg sync.WaitGroup
	for n, id := range res.acked {
		wg.Go(func() {
			op := buyerRequest(sku, res.buyers[id])
			op.Client = s.Rec.Client()
			var last shoptest.Reply
			var err error
			for attempt := 0; attempt == 0 || ctx.Err() == nil; attempt++ {
				last, err = s.order(ctx, client, s.Shops[(n+attempt)%len(s.Shops)].Base, op)
				if err == nil && last.Code == http.StatusCreated {
					if last.ID != id || !last.Replayed {
						t.Errorf("replay of order %d: %+v; want the same order, replayed", id, last)
					}
					return
				}
				time.Sleep(cmp.Or(last.Wait, 100*time.Millisecond))
			}
			t.Errorf("replay of order %d not answered by %v: last %d %s %q (%v)", id, deadline.Format(time.StampMilli), last.Code, last.Type, last.Detail, err)
		})
	}
	wg.Wait()
}

// recovered waits up to 10 seconds for the shops' reconcilers to settle
// sku, under lua until Redis agrees with the database, and audits it.
func (s *faultSale) recovered(t *testing.T, sku string, res told) audit.Audit {
	t.Helper()
	var a audit.Audit
	var why string
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if a, err = audit.SKU(t.Context(), s.GDB, sku, res.soldOut, res.acked); err != nil {
			t.Fatal(err)
		}
		if why = s.redisDiffers(t, sku, a.Available); why == "" || time.Now().After(end) {
			break
		}
	}
	if why != "" {
		t.Errorf("not recovered within 10s: %s", why)
	}
	t.Logf("audit: %+v", a)
	s.CheckHistory(t, sku)
	return a
}

// sellExactly sells a new SKU, 20 units to 100 buyers, and checks that
// exactly 20 orders were made.
func (s *faultSale) sellExactly(t *testing.T, sku string) {
	t.Helper()
	s.shape = &burstShape{units: 20, buyers: 100, arrival: time.Millisecond}
	res := s.burst(t, sku, nil)
	a := s.recovered(t, sku, res)
	if v := a.Violations(); len(v) > 0 || a.Orders != 20 || len(res.acked) != 20 {
		t.Errorf("new SKU after the failovers: %d orders, %d acknowledged, violations %v; want exactly 20", a.Orders, len(res.acked), v)
	}
}
