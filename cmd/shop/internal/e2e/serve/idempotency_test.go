package serve

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// shop is a `shop serve` child process with its own database and Redis
// prefix, and direct handles on both for the checks.
type shop struct {
	base   string
	dsn    string
	db     *gorm.DB
	redis  *redis.Client
	prefix string
	// luaKeys: the shop keeps its orders' keys in Redis, where lua keeps
	// its stock. The others keep none for an order, whose row answers its
	// retries.
	luaKeys bool
}

// newShop starts a shop with the given extra environment.
func newShop(t *testing.T, env ...string) *shop {
	t.Helper()
	dsn, r := testinfra.MySQL(t), testinfra.Redis(t)
	env = append([]string{"SHOP_MYSQL_DSN=" + dsn, "SHOP_REDIS_ADDR=" + r.Addr, "SHOP_REDIS_PREFIX=" + r.Prefix, "SHOP_ADMIN_TOKEN=secret"}, env...)
	base, _ := shoptest.Start(t, env...)
	gdb := testinfra.ShopDB(t, dsn)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	return &shop{base: base, dsn: dsn, db: gdb, redis: rdb, prefix: r.Prefix}
}

// putStock puts quantity units of sku on sale.
func (s *shop) putStock(t *testing.T, sku string, quantity int) {
	t.Helper()
	if code, body := shoptest.Send(t, "PUT", s.base+"/api/v1/stock/"+sku, fmt.Sprintf(`{"quantity":%d}`, quantity), "Authorization", "Bearer secret"); code != http.StatusOK {
		t.Fatalf("put stock %s: %d %s", sku, code, body)
	}
}

// storm sends n requests at once through a start gate; body and key give
// each one's.
func storm(t *testing.T, n int, url string, key, body func(i int) string) []shoptest.Reply {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	replies := make([]shoptest.Reply, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-gate
			r, err := shoptest.Post(t.Context(), client, url, key(i), body(i))
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
			replies[i] = r
		})
	}
	close(gate)
	wg.Wait()
	return replies
}

// audit checks every invariant of internal/audit from the database.
func (s *shop) audit(t *testing.T, sku string, soldOut int, acked []int64) audit.Audit {
	t.Helper()
	a, err := audit.SKU(t.Context(), s.db, sku, soldOut, acked)
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Violations(); len(v) > 0 {
		t.Errorf("invariants broken: %v", v)
	}
	return a
}

func constant(s string) func(int) string { return func(int) string { return s } }

// keyStrategies keep their buyers' Idempotency-Keys in each of the ways
// the shop keeps them: atomic's orders, as every strategy's but these, in
// the database, by one transaction each; batched's by its batches; lua's
// in its Redis scripts.
var keyStrategies = []string{"atomic", "batched", "lua"}

// eachKeyStore runs test on a shop of each of keyStrategies, in parallel.
func eachKeyStore(t *testing.T, test func(t *testing.T, s *shop)) {
	t.Parallel()
	for _, name := range keyStrategies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newShop(t, "SHOP_STRATEGY="+name)
			s.luaKeys = name == "lua"
			test(t, s)
		})
	}
}

// TestDuplicateClickStorm: a thousand copies of one request (same key, same
// payload) create exactly one order. Each answer is the order (first or
// replayed) or 409 request-in-progress.
func TestDuplicateClickStorm(t *testing.T) { eachKeyStore(t, testDuplicateClickStorm) }

func testDuplicateClickStorm(t *testing.T, s *shop) {
	s.putStock(t, "storm", 10)
	replies := storm(t, 1000, s.base+"/api/v1/orders", constant("click-1"), constant(`{"sku":"storm","user_id":"alice","quantity":2}`))
	var first int64
	var created, inProgress int
	for _, r := range replies {
		switch {
		case r.Code == http.StatusCreated:
			created++
			if first == 0 {
				first = r.ID
			}
			if r.ID != first {
				t.Fatalf("two orders answered: %d and %d", first, r.ID)
			}
		case r.Code == http.StatusConflict && r.Type == "request-in-progress":
			inProgress++
		default:
			t.Errorf("unexpected answer %+v", r)
		}
	}
	t.Logf("%d answered with the order, %d in progress", created, inProgress)
	a := s.audit(t, "storm", 0, []int64{first})
	if a.Orders != 1 || a.Available != 8 {
		t.Errorf("%d orders, %d available; want 1 order and 8 available", a.Orders, a.Available)
	}
}

// TestRetryAfterLostResponse: the client's connection drops after the shop
// committed but before the client read the reply. The retry with the same
// key gets the same order, and there is still one order.
func TestRetryAfterLostResponse(t *testing.T) { eachKeyStore(t, testRetryAfterLostResponse) }

func testRetryAfterLostResponse(t *testing.T, s *shop) {
	s.putStock(t, "lost", 5)
	body := `{"sku":"lost","user_id":"bob","quantity":1}`
	u, err := url.Parse(s.base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /api/v1/orders HTTP/1.1\r\nHost: %s\r\nIdempotency-Key: retry-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.Host, len(body), body)
	// Wait for the commit, then drop the connection unread.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		if err := s.db.Table("orders").Where("user_id = ?", "bob").Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request made no order within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn.Close()

	var r shoptest.Reply
	for {
		if r, err = shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", "retry-1", body); err != nil {
			t.Fatal(err)
		}
		if r.Type != "request-in-progress" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.Code != http.StatusCreated || !r.Replayed {
		t.Fatalf("retry: %+v, want a replayed 201", r)
	}
	if a := s.audit(t, "lost", 0, []int64{r.ID}); a.Orders != 1 || a.Available != 4 {
		t.Errorf("%d orders, %d available; want 1 and 4", a.Orders, a.Available)
	}
}

// TestRedisForgets: with the idempotency keys gone from Redis (a restart,
// an eviction, an expiry), a retry still gets the first order: the unique
// index on (user_id, idempotency_key) holds. A retry with another quantity
// under the same key is refused, not ordered.
func TestRedisForgets(t *testing.T) { eachKeyStore(t, testRedisForgets) }

func testRedisForgets(t *testing.T, s *shop) {
	s.putStock(t, "forget", 5)
	body := `{"sku":"forget","user_id":"carol","quantity":1}`
	first, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", "forget-1", body)
	if err != nil || first.Code != http.StatusCreated {
		t.Fatalf("first: %+v %v", first, err)
	}
	flushed := s.flushKeys(t)
	if flushed == 0 && s.luaKeys {
		t.Fatal("no idempotency keys in Redis to flush")
	}
	again, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", "forget-1", body)
	if err != nil || again.Code != http.StatusCreated || again.ID != first.ID || !again.Replayed {
		t.Fatalf("retry after flush: %+v %v, want the replayed order %d", again, err, first.ID)
	}
	s.flushKeys(t)
	changed, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", "forget-1", `{"sku":"forget","user_id":"carol","quantity":2}`)
	if err != nil || changed.Code != http.StatusUnprocessableEntity || changed.Type != "idempotency-key-reused" {
		t.Fatalf("changed payload after flush: %+v %v, want 422", changed, err)
	}
	if a := s.audit(t, "forget", 0, []int64{first.ID}); a.Orders != 1 || a.Available != 4 {
		t.Errorf("%d orders, %d available; want 1 and 4", a.Orders, a.Available)
	}
}

// flushKeys deletes this shop's keys from Redis and says how many.
func (s *shop) flushKeys(t *testing.T) int {
	t.Helper()
	keys, err := s.redis.Keys(t.Context(), s.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := s.redis.Del(t.Context(), keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return len(keys)
}

// TestKeyReuse: the same key with a changed quantity gets 422 and changes
// nothing; the original request with it is still replayed.
func TestKeyReuse(t *testing.T) { eachKeyStore(t, testKeyReuse) }

func testKeyReuse(t *testing.T, s *shop) {
	s.putStock(t, "reuse", 5)
	first, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", "reuse-1", `{"sku":"reuse","user_id":"dan","quantity":1}`)
	if err != nil || first.Code != http.StatusCreated {
		t.Fatalf("first: %+v %v", first, err)
	}
	r, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", "reuse-1", `{"sku":"reuse","user_id":"dan","quantity":3}`)
	if err != nil || r.Code != http.StatusUnprocessableEntity || r.Type != "idempotency-key-reused" {
		t.Fatalf("reuse: %+v %v, want 422 idempotency-key-reused", r, err)
	}
	// The same key for another user is another key.
	other, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", "reuse-1", `{"sku":"reuse","user_id":"erin","quantity":3}`)
	if err != nil || other.Code != http.StatusCreated || other.ID == first.ID {
		t.Fatalf("same key, other user: %+v %v, want a new order", other, err)
	}
	if a := s.audit(t, "reuse", 0, []int64{first.ID, other.ID}); a.Orders != 2 || a.Available != 1 {
		t.Errorf("%d orders, %d available; want 2 and 1", a.Orders, a.Available)
	}
}

// TestRefundStorm: a thousand refunds of one order, each with its own key,
// return its stock exactly once; every other one is 409 already-refunded.
// A refund by another user is 404 and changes nothing.
func TestRefundStorm(t *testing.T) { eachKeyStore(t, testRefundStorm) }

func testRefundStorm(t *testing.T, s *shop) {
	s.putStock(t, "refund", 5)
	o, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", "buy-1", `{"sku":"refund","user_id":"fay","quantity":3}`)
	if err != nil || o.Code != http.StatusCreated {
		t.Fatalf("order: %+v %v", o, err)
	}
	refund := fmt.Sprintf("%s/api/v1/orders/%d/refund", s.base, o.ID)
	stranger, err := shoptest.Post(t.Context(), http.DefaultClient, refund, "r-x", `{"user_id":"mallory"}`)
	if err != nil || stranger.Code != http.StatusNotFound {
		t.Fatalf("refund by another user: %+v %v, want 404", stranger, err)
	}
	replies := storm(t, 1000, refund, func(i int) string { return fmt.Sprint("r-", i) }, constant(`{"user_id":"fay"}`))
	var ok, already int
	for _, r := range replies {
		switch {
		case r.Code == http.StatusOK && r.Status == "refunded":
			ok++
		case r.Code == http.StatusConflict && r.Type == "already-refunded":
			already++
		default:
			t.Errorf("unexpected answer %+v", r)
		}
	}
	if ok != 1 {
		t.Errorf("%d refunds succeeded, want 1 (%d already refunded)", ok, already)
	}
	if a := s.audit(t, "refund", 0, nil); a.Orders != 0 || a.Available != 5 {
		t.Errorf("%d live orders, %d available; want 0 and 5", a.Orders, a.Available)
	}
}

// TestPerUserLimit: under SHOP_PER_USER_LIMIT=1, 200 concurrent orders by
// one user with distinct keys create exactly one order, whatever the
// strategy. The same burst with no limit makes many, which shows that the
// test can tell.
func TestPerUserLimit(t *testing.T) {
	t.Parallel()
	burst := func(t *testing.T, env ...string) (audit.Audit, map[string]int) {
		s := newShop(t, env...)
		s.putStock(t, "limit", 100)
		replies := storm(t, 200, s.base+"/api/v1/orders", func(i int) string { return fmt.Sprint("k-", i) }, constant(`{"sku":"limit","user_id":"greedy","quantity":1}`))
		answers := map[string]int{}
		var acked []int64
		for _, r := range replies {
			answers[fmt.Sprint(r.Code, r.Type)]++
			if r.Code == http.StatusCreated {
				acked = append(acked, r.ID)
			}
		}
		return s.audit(t, "limit", 0, acked), answers
	}
	t.Run("no limit", func(t *testing.T) {
		t.Parallel()
		a, answers := burst(t, "SHOP_STRATEGY=atomic")
		if a.Orders <= 1 {
			t.Errorf("with no limit the burst made %d orders (%v); the test cannot tell a missing limit", a.Orders, answers)
		}
		t.Logf("with no limit: %d orders for one user", a.Orders)
	})
	for _, s := range strategy.All() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			// A deadline far above what 200 queued requests of one user
			// take on a loaded machine: the test is about the limit, and a
			// request that ran out of time (503 busy) would tell nothing.
			// The write timeout must outlast it, and so must lua's claim
			// timeout, or a reservation still being persisted is taken over.
			a, answers := burst(t, append(strategytest.Environ(strategytest.NeedsEnv(t, s)), "SHOP_PER_USER_LIMIT=1",
				"SHOP_REQUEST_TIMEOUT=2m", "SHOP_HTTP_WRITE_TIMEOUT=2m10s", "SHOP_CLAIM_IDLE=2m30s")...)
			if a.Orders != 1 || a.Sold != 1 || answers["201"] != 1 || answers["409limit-reached"] != 199 {
				t.Errorf("%d orders, %d sold, answers %v; want 1 order and 199 limit-reached", a.Orders, a.Sold, answers)
			}
		})
	}
}

// TestSoldOutReplayed: 409 sold-out is a final answer. The same request
// again, even once a refund has put a unit back, gets it again, status and
// body, replayed, and takes nothing; a new buyer gets the unit.
func TestSoldOutReplayed(t *testing.T) { eachKeyStore(t, testSoldOutReplayed) }

func testSoldOutReplayed(t *testing.T, s *shop) {
	s.putStock(t, "last", 1)
	orders := s.base + "/api/v1/orders"
	ann, err := shoptest.Post(t.Context(), http.DefaultClient, orders, "ann-1", `{"sku":"last","user_id":"ann","quantity":1}`)
	if err != nil || ann.Code != http.StatusCreated {
		t.Fatalf("ann: %+v %v", ann, err)
	}
	bob := `{"sku":"last","user_id":"bob","quantity":1}`
	first, err := shoptest.Post(t.Context(), http.DefaultClient, orders, "bob-1", bob)
	if err != nil || first.Code != http.StatusConflict || first.Replayed || first.Type != "sold-out" {
		t.Fatalf("bob: %+v %v, want 409 sold-out, not replayed", first, err)
	}
	if r, err := shoptest.Post(t.Context(), http.DefaultClient, fmt.Sprintf("%s/%d/refund", orders, ann.ID), "ann-r", `{"user_id":"ann"}`); err != nil || r.Code != http.StatusOK {
		t.Fatalf("refund: %+v %v", r, err)
	}
	again, err := shoptest.Post(t.Context(), http.DefaultClient, orders, "bob-1", bob)
	if err != nil || again.Code != http.StatusConflict || !again.Replayed || again.Body != first.Body {
		t.Errorf("bob again, with a unit back: %+v %v; want the first answer replayed: %s", again, err, first.Body)
	}
	cat, err := shoptest.Post(t.Context(), http.DefaultClient, orders, "cat-1", `{"sku":"last","user_id":"cat","quantity":1}`)
	if err != nil || cat.Code != http.StatusCreated {
		t.Fatalf("cat, after the refund: %+v %v", cat, err)
	}
	if a := s.audit(t, "last", 1, []int64{cat.ID}); a.Orders != 1 || a.Available != 0 {
		t.Errorf("%d orders, %d available; want 1 and 0", a.Orders, a.Available)
	}
}
