package fault

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/lua/redisstock"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// The fault tests run lua, or the strategy a test names, on three `shop
// serve` processes, over a Redis of the test's own, which it can kill and
// start empty, and over MySQL through a proxy, which it can cut: the
// test's MariaDB is shared with the other tests, so the proxy stands in
// for stopping it, and the shop sees what a stopped server shows, its
// connections reset and new ones refused. Buyers
// retry with their key until they get an answer that is not busy, as a
// client should, after the answer's Retry-After. Each test audits the
// database afterwards: 0 oversold, a row for every 201, no duplicate,
// and, after one reconcile, 0 undersold and Redis's available equal to
// the database's; and it checks the sale's history, every request and
// its answer, against the shop's model (history_test.go).

const (
	faultStock  = 150
	faultBuyers = 450
	// faultArrival spreads the buyers' arrivals, so that the fault lands
	// mid-burst.
	faultArrival = 4 * time.Millisecond
)

// shortShape is the burst of the tests that kill or pause a shop, or pause
// or crash a server, under every strategy they run: 60 units for 180 buyers,
// arriving as densely as faultBuyers, the fault once 20 are sold. Under a
// lock the sales queue one at a time, and a burst lasts about as long as
// its units take; a third sold before the fault and the rest after it, as
// in faultStock's burst.
var shortShape = burstShape{units: 60, buyers: 180, arrival: faultArrival, faultAt: 20}

// faultSale is a strategy, lua unless a test says, on three shop
// processes, with the servers that the test breaks.
type faultSale struct {
	*shoptest.Sale
	redis    *testinfra.Server // nil on a Redis Cluster
	zk, etcd *testinfra.Server // the lock's server, when the test started it
	buckets  int               // SHOP_SKU_BUCKETS, when a test sets it
	proxy    *testinfra.Proxy
	// shape, when set, is the burst's instead of faultStock units for
	// faultBuyers buyers.
	shape *burstShape
	// lockTTL is SHOP_LOCK_TTL, when a test sets it longer than the
	// claim's idle time: a buyer who gave up waiting for the lock during
	// an outage may leave its place in the lock's queue until its lease
	// ends, when the call that would free it cannot reach the server.
	lockTTL time.Duration
	// deadline is SHOP_REQUEST_TIMEOUT, when a test sets it past 4 s:
	// the buyers wait a second longer.
	deadline time.Duration
}

// burstShape is a burst's size, and when its fault runs.
type burstShape struct {
	units, buyers int
	arrival       time.Duration // between two buyers' arrivals
	faultAt       int           // the fault runs once this many orders are acknowledged
}

// newFaultSale runs strategy on servers of the test's own: a Redis, and
// the ZooKeeper or etcd that its lock needs.
func newFaultSale(t *testing.T, strategy string) *faultSale {
	t.Helper()
	var env []string
	var zk, etcd *testinfra.Server
	switch strategy {
	case "zookeeper":
		zk = testinfra.StartZooKeeper(t)
		env = []string{"SHOP_ZK_ADDRS=" + zk.Addr()}
	case "etcd":
		etcd = testinfra.StartEtcd(t)
		env = []string{"SHOP_ETCD_ADDRS=" + etcd.Addr()}
	}
	r := testinfra.StartRedis(t)
	s := newSale(t, strategy, r.Addr(), env...)
	s.redis, s.zk, s.etcd = r, zk, etcd
	return s
}

// newSale runs strategy on the Redis at redisAddr: one address, or a Redis
// Cluster's seed nodes, comma-separated; and on the shared MySQL, through
// a proxy. env adds SHOP_* settings.
func newSale(t *testing.T, strategy, redisAddr string, env ...string) *faultSale {
	t.Helper()
	direct := testinfra.MySQL(t)
	cfg, err := mysql.ParseDSN(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testinfra.StartProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	s := startSale(t, strategy, cfg.FormatDSN(), testinfra.ShopDB(t, direct), redisAddr, env)
	s.proxy = proxy
	return s
}

// startSale runs strategy on three shops (shoptest.StartSale).
func startSale(t *testing.T, strategy, dsn string, gdb *gorm.DB, redisAddr string, env []string) *faultSale {
	t.Helper()
	return &faultSale{Sale: shoptest.StartSale(t, strategy, dsn, gdb, redisAddr, env)}
}

// faultsNeedServers skips a fault test under -short: its servers are
// processes of its own, which it stops, pauses, kills or restarts.
func faultsNeedServers(t *testing.T) {
	t.Helper()
	testinfra.NeedsRealServers(t, "it stops, pauses, kills or restarts server processes of its own")
}

// buyerRequest is buyer i's order in a burst of sku: one unit, under its
// key.
func buyerRequest(sku string, i int) history.Op {
	return history.Op{Kind: history.Order, User: fmt.Sprint("u", i), Key: fmt.Sprint(sku, "-k", i), Items: []history.Item{{SKU: sku, Quantity: 1}}}
}

// told is what the buyers of one burst were told.
type told struct {
	acked   []int64
	ackedAt []time.Time   // when each 201 came, in order
	finalAt []time.Time   // when each 201 or sold-out answer came, in order
	buyers  map[int64]int // the buyer of each acknowledged order
	soldOut int
	short   map[string]int // by SKU, the sold-out answers that named it
	// unavailable counts the answers 502 to 504, which a buyer retries;
	// a 500 fails the test at once: it is left for bugs.
	unavailable int
	gateway     int // of them, those other than 503
	busyBuyers  int // the buyers answered 502 to 504 at least once
}

// longestWithoutSales is the longest time between two acknowledgements.
func (r told) longestWithoutSales() time.Duration {
	var gap time.Duration
	for i := 1; i < len(r.ackedAt); i++ {
		gap = max(gap, r.ackedAt[i].Sub(r.ackedAt[i-1]))
	}
	return gap
}

// finalAfter returns the time of the first 201 or sold-out answer after
// t, if one came after it.
func (r told) finalAfter(t time.Time) (time.Time, bool) {
	for _, at := range r.finalAt {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// burst sells sku to faultBuyers buyers arriving over about two seconds,
// spread over the shops, and calls fault, if not nil, once faultStock/3
// orders are acknowledged. Each buyer retries with its key, on the next
// shop, until it is answered 201 or sold-out.
func (s *faultSale) burst(t *testing.T, sku string, fault func()) told {
	t.Helper()
	s.onSale(t, sku)
	return s.buy(t, func(i int) history.Op { return buyerRequest(sku, i) }, fault)
}

// putStock puts the burst's units of sku on sale.
func (s *faultSale) putStock(t *testing.T, sku string) {
	t.Helper()
	op := history.Op{Client: s.Rec.Client(), Kind: history.StockSet, Items: []history.Item{{SKU: sku, Quantity: s.burstShape().units}}}
	// Busy, as right after a failover, is an answer to retry.
	r := shoptest.Reply{Code: http.StatusServiceUnavailable}
	for try := 0; r.Code == http.StatusServiceUnavailable && try < 10; try++ {
		if try > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		r = s.sendStock(t, s.Shops[try%len(s.Shops)].Base, op)
	}
	if r.Code != http.StatusOK {
		t.Fatalf("put stock %s: %d %s", sku, r.Code, r.Body)
	}
}

// sendStock sends op, a stock set or a stock read of its SKU, to the shop
// at base, and records it.
func (s *faultSale) sendStock(t *testing.T, base string, op history.Op) shoptest.Reply {
	t.Helper()
	method, body, header := "GET", "", []string(nil)
	if op.Kind == history.StockSet {
		method, body, header = "PUT", fmt.Sprintf(`{"quantity":%d}`, op.Items[0].Quantity), []string{"Authorization", "Bearer secret"}
	}
	r, _ := shoptest.Recorded(s.Rec, op, func() (shoptest.Reply, error) {
		code, b := shoptest.Send(t, method, base+"/api/v1/stock/"+op.Items[0].SKU, body, header...)
		r := shoptest.Reply{Code: code, Body: b}
		return r, json.Unmarshal([]byte(b), &r)
	})
	return r
}

// burstShape is the shape of s's bursts.
func (s *faultSale) burstShape() burstShape {
	if s.shape != nil {
		return *s.shape
	}
	return burstShape{units: faultStock, buyers: faultBuyers, arrival: faultArrival, faultAt: faultStock / 3}
}

// buy is burst's buyers, buyer i sending request i's order, each attempt
// recorded in the sale's history. A buyer answered busy or in progress
// asks again after the answer's Retry-After.
func (s *faultSale) buy(t *testing.T, request func(i int) history.Op, fault func()) told {
	t.Helper()
	shape := s.burstShape()
	var created atomic.Int64
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var (
		mu   sync.Mutex
		res  = told{buyers: make(map[int64]int), short: make(map[string]int)}
		once sync.Once
		wg   sync.WaitGroup
	)
	client := &http.Client{Timeout: max(5*time.Second, s.deadline+time.Second)}
	for i := range shape.buyers {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * shape.arrival)
			op := request(i)
			op.Client = s.Rec.Client()
			var answered shoptest.Reply // the last answer
			busy := false
			for attempt := 0; ; attempt++ {
				r, err := s.order(ctx, client, s.Shops[(i+attempt)%len(s.Shops)].Base, op)
				if err == nil {
					answered = r
				}
				switch {
				case err == nil && r.Code == http.StatusCreated:
					mu.Lock()
					res.acked = append(res.acked, r.ID)
					res.ackedAt = append(res.ackedAt, time.Now())
					res.finalAt = append(res.finalAt, time.Now())
					res.buyers[r.ID] = i
					mu.Unlock()
					if created.Add(1) == int64(shape.faultAt) && fault != nil {
						once.Do(func() { go fault() })
					}
					return
				case err == nil && r.Type == "sold-out":
					mu.Lock()
					res.soldOut++
					res.finalAt = append(res.finalAt, time.Now())
					for _, sku := range r.SKUs {
						res.short[sku]++
					}
					mu.Unlock()
					return
				case err == nil && r.Code < 500 && r.Type != "request-in-progress":
					t.Errorf("buyer %d: %d %s", i, r.Code, r.Type)
					return
				case err == nil && r.Code == http.StatusInternalServerError:
					t.Errorf("buyer %d: 500 %s: %s", i, r.Type, r.Detail)
					return
				case err == nil && r.Code > 500:
					mu.Lock()
					res.unavailable++
					if !busy {
						busy = true
						res.busyBuyers++
					}
					if r.Code != http.StatusServiceUnavailable {
						res.gateway++
					}
					mu.Unlock()
				case ctx.Err() != nil:
					t.Errorf("buyer %d got no final answer in time: last %+v", i, answered)
					return
				}
				time.Sleep(cmp.Or(r.Wait, 100*time.Millisecond)) // busy, in progress, or the shop is gone
			}
		})
	}
	wg.Wait()
	if created.Load() < int64(shape.faultAt) && fault != nil {
		t.Fatalf("only %d orders acknowledged; the fault never ran", created.Load())
	}
	return res
}

// settle runs one reconcile, after every reservation left pending by a
// dead shop is old enough to claim, and audits sku: the invariants, and
// Redis's available equal to the database's.
func (s *faultSale) settle(t *testing.T, sku string, res told) audit.Audit {
	t.Helper()
	if s.Strategy == "lua" { // the only strategy that reserves before it persists
		time.Sleep(3*time.Second + 500*time.Millisecond) // SHOP_CLAIM_IDLE, and a margin
	}
	s.reconcile(t)
	a, err := audit.SKU(t.Context(), s.GDB, sku, res.soldOut, res.acked)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("audit: %+v; %d acknowledged, %d told sold out", a, len(res.acked), res.soldOut)
	if v := a.Violations(); len(v) > 0 {
		t.Errorf("invariants broken: %v", v)
	}
	if a.Orders != len(res.acked) {
		var users []string
		s.GDB.Raw(`SELECT user_id FROM orders WHERE sku = ? AND id NOT IN ?`, sku, append(res.acked, 0)).Scan(&users)
		t.Errorf("%d orders in the database, %d acknowledged; not acknowledged: %v", a.Orders, len(res.acked), users)
	}
	if why := s.redisDiffers(t, sku, a.Available); why != "" {
		t.Error(why)
	}
	s.CheckHistory(t, sku)
	return a
}

// redisDiffers says how lua's Redis state of sku differs from available,
// the database's: a bucket missing, a reservation pending, or another
// total. It is empty when they agree, and under the other strategies.
func (s *faultSale) redisDiffers(t *testing.T, sku string, available int) string {
	t.Helper()
	if s.Strategy != "lua" {
		return ""
	}
	inRedis := 0
	for b := range max(s.buckets, 1) {
		st, err := redisstock.New(s.RDB, s.Prefix).State(t.Context(), redisstock.BucketOf(sku, b))
		if err != nil {
			return err.Error()
		}
		if !st.Exists || len(st.Log) > 0 {
			return fmt.Sprintf("Redis's bucket %d of %s: %+v; want a state, nothing pending", b, sku, st)
		}
		inRedis += st.Available
	}
	if inRedis != available {
		return fmt.Sprintf("Redis has %d available, the database %d", inRedis, available)
	}
	return ""
}

// reconcile runs `shop reconcile` once.
func (s *faultSale) reconcile(t *testing.T) {
	t.Helper()
	env := map[string]string{"SHOP_MYSQL_DSN": s.DSN, "SHOP_REDIS_ADDR": s.RedisAddr, "SHOP_REDIS_PREFIX": s.Prefix, "SHOP_CLAIM_IDLE": "3s",
		"SHOP_SKU_BUCKETS": strconv.Itoa(max(s.buckets, 1))}
	var out, errs strings.Builder
	if err := shoptest.Run(t.Context(), []string{"reconcile"}, func(k string) string { return env[k] }, &out, &errs); err != nil {
		t.Fatalf("shop reconcile: %v\n%s", err, errs.String())
	}
	t.Logf("shop reconcile:\n%s", out.String())
}

// sellThrough sells sku in a burst with fault run mid-burst, waits for
// the fault to end, and audits: the invariants, and every unit sold. It
// returns what the buyers were told.
func (s *faultSale) sellThrough(t *testing.T, sku string, fault func()) told {
	t.Helper()
	done := make(chan struct{})
	res := s.burst(t, sku, func() {
		defer close(done)
		fault()
	})
	<-done
	a := s.settle(t, sku, res)
	if a.Available != 0 {
		t.Errorf("%d units left after the burst", a.Available)
	}
	return res
}

// TestFaultKillShop: one of three shops is killed (SIGKILL) mid-burst.
// Its buyers' retries reach the others. Under lua, what it had reserved
// and not persisted is claimed and persisted by another. Under the others
// what it had in flight dies with its connections: a batch or a
// transaction that holds the stock row rolls back, and a lock it held is
// taken over once its lease ends.
func TestFaultKillShop(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	for _, strategy := range []string{"lua", "batched", "pessimistic", "redis", "zookeeper", "etcd", "dbtable"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			s := newFaultSale(t, strategy)
			s.shape = &shortShape
			s.killOneDuring(t, "f-kill-"+strategy)
		})
	}
}

// killOneDuring sells sku, kills one shop mid-burst, and audits.
func (s *faultSale) killOneDuring(t *testing.T, sku string) {
	t.Helper()
	victim := s.Shops[1]
	res := s.burst(t, sku, func() {
		if err := victim.Cmd.Process.Kill(); err != nil {
			t.Error(err)
		}
	})
	err := victim.Cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the shop was not killed: %v", err)
	}
	s.settle(t, sku, res)
}

// TestServeOnRedisCluster: SHOP_REDIS_ADDR lists the seed nodes of a Redis
// Cluster of three masters. lua sells a burst on three shops, one of them
// killed mid-burst, and the audit holds. The SKU's slot, where its buyers'
// answers are kept with its stock, is on another master than the first
// seed node: the shops spoke to the cluster as one, where a client of that
// node alone is refused (MOVED).
func TestServeOnRedisCluster(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	seeds := testinfra.StartRedisCluster(t)
	s := newSale(t, "lua", strings.Join(seeds, ","))
	cc := s.RDB.(*redis.ClusterClient)
	var sku string
	var master *redis.Client
	for i := 0; master == nil || master.Options().Addr == seeds[0]; i++ {
		var err error
		sku = fmt.Sprint("cluster-", i)
		if master, err = cc.MasterForKey(t.Context(), "{"+sku+"}"); err != nil {
			t.Fatal(err)
		}
	}
	s.killOneDuring(t, sku)
	answers, err := master.Keys(t.Context(), s.Prefix+"lua:{"+sku+"}:answer:*").Result()
	if err != nil || len(answers) == 0 {
		t.Errorf("%d answers kept on %s, the master of %s's slot (%v); want the buyers'", len(answers), master.Options().Addr, sku, err)
	}
}

// TestServeBucketsOnRedisCluster: TestServeOnRedisCluster with each SKU's
// stock split into 6 buckets (SHOP_SKU_BUCKETS) over the cluster's three
// masters: one of three shops is killed mid-burst, and once its
// reservations are claimed, the audit holds and Redis's buckets together
// hold what the database has, with nothing pending, and the sale's history
// is linearizable.
func TestServeBucketsOnRedisCluster(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	s := newSale(t, "lua", strings.Join(testinfra.StartRedisCluster(t), ","), "SHOP_SKU_BUCKETS=6")
	s.buckets = 6
	s.killOneDuring(t, "buckets")
}

// TestFaultRedisRestartsEmpty: Redis is killed mid-burst and started again
// with nothing in it: no Idempotency-Key, and under lua no stock state and
// no recovery log. The shops rebuild each SKU's state from the database
// before they sell from it again, and the database's unique index keeps a
// retried order from being made twice.
func TestFaultRedisRestartsEmpty(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	for _, strategy := range []string{"lua", "batched", "atomic"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			s := newFaultSale(t, strategy)
			const marker = "fault:marker"
			if err := s.RDB.Set(t.Context(), marker, 1, 0).Err(); err != nil {
				t.Fatal(err)
			}
			s.sellThrough(t, "f-redis-"+strategy, func() {
				s.redis.Kill()
				time.Sleep(500 * time.Millisecond)
				s.redis.Start()
				if n, err := s.RDB.Exists(context.Background(), marker).Result(); err != nil || n != 0 {
					t.Errorf("Redis did not come back empty: marker %d, %v", n, err)
				}
			})
		})
	}
}

// TestFaultPausedShop: one of three shops is paused (SIGSTOP) mid-burst
// for three times the lock TTL, then resumed, under the lock strategies
// and the group commit. A lease it held has expired meanwhile, and another
// shop has sold under a newer token; whatever the paused shop had in
// flight is refused by the fence, or commits before the pause, and the
// audit holds.
func TestFaultPausedShop(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	for _, strategy := range []string{"redis", "zookeeper", "etcd", "dbtable", "batched"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			s := newFaultSale(t, strategy)
			s.shape = &shortShape
			s.sellThrough(t, "f-pause-"+strategy, func() {
				victim := s.Shops[1]
				if victim.Pause(t) {
					time.Sleep(3 * time.Second) // SHOP_LOCK_TTL is 1s
				}
				if err := victim.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Error(err)
				}
			})
		})
	}
}

// TestFaultServerPaused: the server a strategy depends on is paused
// (SIGSTOP) mid-burst for three lock TTLs, then resumed: the lock's
// server, or the Redis that holds lua's stock and every strategy's
// Idempotency-Keys. Leases run out meanwhile, requests time out, and a
// paused Redis answers the idempotency claims late or not at all. Every
// unit still sells once the server is back, and the audit holds.
func TestFaultServerPaused(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	for _, strategy := range []string{"redis", "zookeeper", "etcd", "lua", "batched"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			s := newFaultSale(t, strategy)
			s.shape = &shortShape
			srv := s.redis
			switch strategy {
			case "zookeeper":
				srv = s.zk
			case "etcd":
				srv = s.etcd
			}
			s.sellThrough(t, "f-server-pause-"+strategy, func() {
				srv.Pause()
				time.Sleep(3 * time.Second) // SHOP_LOCK_TTL is 1s
				srv.Resume()
			})
		})
	}
}

// restartWrites is how many writes a lock server whose tokens count every
// write makes before TestFaultLockServerRestartsEmpty.
const restartWrites = 300

// TestFaultLockServerRestartsEmpty: the lock's server is killed mid-burst
// and started again with nothing in it, so that it counts its tokens from
// the start again, below the fence the database has kept; then once more
// between two sales of the SKU. The shops go on selling: a holder that the
// fence refuses raises its token past it, and a ZooKeeper connection that
// the emptied ensemble refuses is replaced.
func TestFaultLockServerRestartsEmpty(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	var counted atomic.Int64 // token raises, in the shops' metrics
	t.Cleanup(func() {
		if counted.Load() < 1 {
			t.Errorf("the shops' metrics count no token raise under any strategy, want at least 1")
		}
	})
	for _, tc := range []struct {
		strategy string
		start    func(t *testing.T) (srv *testinfra.Server, env []string)
	}{
		{"redis", func(t *testing.T) (*testinfra.Server, []string) { return testinfra.StartRedis(t), nil }},
		// Their tokens count every write to the server, as few before the
		// restart as after it; so many writes come first, and the restart
		// takes the count far below the fence.
		{"zookeeper", func(t *testing.T) (*testinfra.Server, []string) {
			s := testinfra.StartZooKeeper(t)
			conn, _, err := zk.Connect([]string{s.Addr()}, 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = conn.Create("/writes", nil, 0, zk.WorldACL(zk.PermAll))
			for i := 0; err == nil && i < restartWrites; i++ {
				_, err = conn.Set("/writes", nil, -1)
			}
			if err != nil {
				t.Fatal(err)
			}
			return s, []string{"SHOP_ZK_ADDRS=" + s.Addr()}
		}},
		{"etcd", func(t *testing.T) (*testinfra.Server, []string) {
			s := testinfra.StartEtcd(t)
			c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Addr()}, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for i := 0; err == nil && i < restartWrites; i++ {
				_, err = c.Put(t.Context(), "writes", "")
			}
			if err != nil {
				t.Fatal(err)
			}
			return s, []string{"SHOP_ETCD_ADDRS=" + s.Addr()}
		}},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			t.Parallel()
			srv, env := tc.start(t)
			redisAddr := srv.Addr() // redis: the lock is on the shop's own Redis
			if env != nil {
				redisAddr = testinfra.StartRedis(t).Addr() // newSale's key prefix is the same in every run
			}
			s := newSale(t, tc.strategy, redisAddr, env...)
			sku := "f-lock-" + tc.strategy
			restart := func() {
				srv.Kill()
				srv.Empty()
				srv.Start()
			}
			res := s.sellThrough(t, sku, restart)
			// The restart mid-burst comes once the client has counted a
			// third of the units acknowledged; a loaded machine can count
			// them so late that every unit is sold by then, and no holder
			// needs to raise its token. So the server restarts empty once
			// more between two sales of the SKU, and the next units must
			// raise one: every token the emptied server counts is far below
			// the fence, which is past 150 acquisitions or 300 writes.
			fence := func() int64 {
				it, err := stock.Get(t.Context(), s.GDB, sku)
				if err != nil {
					t.Fatal(err)
				}
				return it.Fence
			}
			before := fence()
			s.shape = &burstShape{units: 10, buyers: 20, arrival: faultArrival}
			s.putStock(t, sku) // the next units, in the same history
			restart()
			more := s.buy(t, func(i int) history.Op { return buyerRequest(sku, faultBuyers+i) }, nil)
			if a := s.settle(t, sku, told{acked: append(res.acked, more.acked...), soldOut: res.soldOut + more.soldOut}); a.Available != 0 {
				t.Errorf("%d units left after the sale after the second restart", a.Available)
			}
			// A raised token is 65,536 past the fence it was refused by.
			if after := fence(); after < before+1<<16 {
				t.Errorf("fence %d, and %d before the second restart: no holder raised its token, so the server kept its count", after, before)
			}
			raises := 0.0
			for _, o := range s.Shops {
				raises += shoptest.Scrape(t, o.Debug)[`shop_lock_token_raises_total{backend="`+tc.strategy+`"}`]
			}
			// A raise whose answer a loaded machine lost past the request's
			// deadline took effect but is not counted: the metric is checked
			// over the three servers.
			t.Logf("the shops' metrics count %v token raises", raises)
			counted.Add(int64(raises))
		})
	}
}

// ping pings MySQL as the shops reach it, on a new connection, for at
// most d.
func (s *faultSale) ping(d time.Duration) error {
	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return db.PingContext(ctx)
}

// TestFaultMySQLPaused: MySQL stops answering for three seconds
// mid-burst, as a paused server would: every byte to and from it is held
// at the proxy, connections stay open, and what was sent before the pause
// may commit with its answer held. Requests time out busy meanwhile; a
// buyer whose order committed unanswered finds it on its retry.
func TestFaultMySQLPaused(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	for _, strategy := range []string{"lua", "batched", "atomic", "pessimistic", "redis"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			s := newFaultSale(t, strategy)
			s.sellThrough(t, "f-mysql-pause-"+strategy, func() {
				s.proxy.Pause()
				if s.ping(time.Second) == nil {
					t.Error("MySQL answered through the paused proxy")
				}
				time.Sleep(2 * time.Second)
				s.proxy.Resume()
			})
		})
	}
}

// TestFaultMySQLStops: MySQL is unreachable for 2 seconds mid-burst, every
// connection reset and new ones refused. Orders in flight fail or commit;
// none is acknowledged without its row.
func TestFaultMySQLStops(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	s := newFaultSale(t, "lua")
	mended := make(chan struct{})
	res := s.burst(t, "f-mysql", func() {
		defer close(mended)
		s.proxy.Cut()
		if s.ping(time.Second) == nil {
			t.Error("MySQL still answered through the cut proxy")
		}
		time.Sleep(2 * time.Second)
		s.proxy.Mend()
	})
	<-mended
	s.settle(t, "f-mysql", res)
}

// TestFaultReconcilerPaused: the shop running the reconcile job is paused
// (SIGSTOP) mid-run for three times its lease's TTL, mid-burst. Another shop
// takes the job over; the paused run, resumed, learns its lease was lost
// and changes nothing, as the fence makes sure.
func TestFaultReconcilerPaused(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	s := newFaultSale(t, "lua")
	// Many SKUs sold through lua make each reconcile run long enough to
	// be caught running. They are put on sale and sold a unit each by
	// reconcileWorkers clients at a time, each SKU through one shop.
	const extras, reconcileWorkers = 200, 8
	eachExtra(t, extras, reconcileWorkers, func(i int, sku string) error {
		base := s.Shops[i%len(s.Shops)].Base
		req, err := http.NewRequestWithContext(t.Context(), "PUT", base+"/api/v1/stock/"+sku, strings.NewReader(`{"quantity":5}`))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("put stock %s: %d", sku, resp.StatusCode)
		}
		// Busy, on a loaded machine, is an answer to retry, as a client does.
		r := shoptest.Reply{Code: http.StatusServiceUnavailable}
		for try := 0; r.Code == http.StatusServiceUnavailable && try < 10; try++ {
			if r, err = shoptest.Post(t.Context(), http.DefaultClient, base+"/api/v1/orders", sku, fmt.Sprintf(`{"sku":%q,"user_id":"u","quantity":1}`, sku)); err != nil {
				return err
			}
		}
		if r.Code != http.StatusCreated {
			return fmt.Errorf("order %s: %d %s", sku, r.Code, r.Body)
		}
		return nil
	})
	var paused *shoptest.Shop
	resumed := make(chan struct{})
	res := s.burst(t, "f-pause", func() {
		defer close(resumed)
		// A run may end between the scrape that saw it and the SIGSTOP;
		// then the pause proves nothing, and the test pauses again.
		for range 5 {
			o := s.catchReconciling(t)
			if o == nil {
				return
			}
			lost := func() float64 {
				return shoptest.Scrape(t, o.Debug)[`shop_job_runs_total{job="reconcile",result="lost"}`]
			}
			// Another shop takes the job over once the paused one's lease
			// expires. Its run may then wait on a stock row that the paused
			// run locked: MySQL cannot know that a client is paused.
			tookOver := false
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				tookOver = tookOver || s.othersRunning(t, o)
			}
			if err := o.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
				return
			}
			// The paused run, resumed, finds its lease lost, if it was
			// still running when paused.
			time.Sleep(time.Second)
			if lost() == 1 {
				if !tookOver {
					t.Error("no other shop took the reconcile job over while its runner was paused")
				}
				paused = o
				return
			}
		}
	})
	<-resumed
	if paused == nil {
		t.Fatal("no shop was caught mid-run of the reconcile job")
	}
	s.settle(t, "f-pause", res)
	eachExtra(t, extras, reconcileWorkers, func(_ int, sku string) error {
		a, err := audit.SKU(t.Context(), s.GDB, sku, 0, nil)
		if err != nil {
			return err
		}
		st, err := redisstock.New(s.RDB, s.Prefix).State(t.Context(), sku)
		if err != nil {
			return err
		}
		if len(a.Violations()) > 0 || st.Available != a.Available {
			t.Errorf("%s: %v; Redis %+v, the database %d", sku, a.Violations(), st, a.Available)
		}
		return nil
	})
}

// eachExtra runs do for each of TestFaultReconcilerPaused's n extra SKUs,
// workers at a time, and ends the test if any failed.
func eachExtra(t *testing.T, n, workers int, do func(i int, sku string) error) {
	t.Helper()
	next := make(chan int)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(i, fmt.Sprint("f-pause-extra-", i)); err != nil {
					t.Error(err)
					failed.Store(true)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if failed.Load() {
		t.FailNow()
	}
}

// othersRunning reports whether a shop other than o runs the reconcile job.
func (s *faultSale) othersRunning(t *testing.T, o *shoptest.Shop) bool {
	for _, other := range s.Shops {
		if other != o && shoptest.Scrape(t, other.Debug)[`shop_job_running{job="reconcile"}`] == 1 {
			return true
		}
	}
	return false
}

// catchReconciling polls the shops' metrics until one runs the reconcile
// job, and pauses it at once; it confirms from /proc that the process is
// stopped. It returns nil if none was caught within 20 seconds.
func (s *faultSale) catchReconciling(t *testing.T) *shoptest.Shop {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, o := range s.Shops {
			if shoptest.Scrape(t, o.Debug)[`shop_job_running{job="reconcile"}`] != 1 {
				continue
			}
			if !o.Pause(t) {
				return nil
			}
			return o
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// TestFaultMySQLCrashes: the database server is killed (SIGKILL) mid-burst
// and started again with the same command line, under every guarded
// strategy in turn: a MariaDB of the test's own, which the three shops
// reach directly, each strategy's sale on a database of its own there. Orders in flight lose their connections, and new ones are
// refused until it is back. No buyer is answered 500: each is answered
// 503 until the shops can tell, and its retry with the same key gets the
// order its first attempt made, 503 again while its reservation cannot
// be persisted yet, or a fresh attempt. Every 201 has its row and
// replays; nothing is oversold, nor undersold once the reservations left
// pending are claimed; and the same shops then sell a second SKU exactly,
// with no 5xx but 503: a buyer that waited on a lock past its deadline, on
// a loaded machine, is answered busy and retries.
func TestFaultMySQLCrashes(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	// One server, installed once, crashed once under each strategy: the
	// sales run one after another, so that each crash hits one.
	m := testinfra.StartMariaDB(t)
	for _, s := range strategy.All() {
		if s.Name == "none" || s.Name == "local" { // unguarded across three shops
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			dsn := m.DSN(t)
			sale := startSale(t, s.Name, dsn, testinfra.ShopDB(t, dsn), testinfra.StartRedis(t).Addr(),
				strategytest.Environ(strategytest.NeedsEnv(t, s)))
			sale.shape = &shortShape
			sku := "f-crash-" + s.Name
			res := sale.sellThrough(t, sku, func() { crash(t, m) })
			t.Logf("%d answers 502-504 while the database was away", res.unavailable)
			sale.replayAll(t, sku, res)
			sale.CheckHistory(t, sku) // again, with the replays

			after := "f-after-crash-" + s.Name
			res = sale.burst(t, after, nil)
			t.Logf("after the database came back: %d of %d buyers answered 503 at least once", res.busyBuyers, shortShape.buyers)
			if res.gateway > 0 {
				t.Errorf("after the database came back: %d answers 502-504 other than 503", res.gateway)
			}
			a, err := audit.SKU(t.Context(), sale.GDB, after, res.soldOut, res.acked)
			if err != nil {
				t.Fatal(err)
			}
			if v := a.Violations(); len(v) > 0 || a.Available != 0 {
				t.Errorf("after the database came back: %v, %d left", v, a.Available)
			}
			sale.CheckHistory(t, after)
		})
	}
}

const crashDown = 2 * time.Second

// crash kills m and starts it again with the same command line, having
// seen that its process is gone, after crashDown: as long as a loaded
// server takes to come back.
func crash(t *testing.T, m *testinfra.PrivateMySQL) {
	pid := m.Pid()
	start := time.Now()
	m.Kill()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the database's process %d is still there: %v", pid, err)
	}
	time.Sleep(crashDown)
	m.Start()
	t.Logf("the database (pid %d) was killed, and answers again as pid %d after %v", pid, m.Pid(), time.Since(start).Round(time.Millisecond))
}

// replayAll sends every acknowledged order's request again, with its key:
// each answers 201 with the same order, marked replayed.
func (s *faultSale) replayAll(t *testing.T, sku string, res told) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	replayer := s.Rec.Client()
	for n, id := range res.acked {
		op := buyerRequest(sku, res.buyers[id])
		op.Client = replayer
		r, err := s.order(t.Context(), client, s.Shops[n%len(s.Shops)].Base, op)
		if err != nil || r.Code != http.StatusCreated || r.ID != id || !r.Replayed {
			t.Errorf("replay of order %d: %+v, %v; want 201 with the same order, replayed", id, r, err)
		}
	}
}
