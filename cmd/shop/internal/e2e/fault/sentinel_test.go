package fault

import (
	"net/http"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/testinfra"
)

// The Sentinel tests run the shop on a Redis master with one replica
// under three Sentinels (SHOP_REDIS_SENTINEL_MASTER): the shops know only
// the Sentinels' addresses, and a Sentinel answers none of the shop's
// commands, so every use of Redis that works went through the master the
// Sentinels named.

// sentinelEnv is the shops' setting for r's master.
func sentinelEnv(r *testinfra.RedisSentinel) string { return "SHOP_REDIS_SENTINEL_MASTER=" + r.Name }

// TestServeOnRedisSentinel runs each use of Redis under Sentinel, one
// setup for all: lua's stock, scripts and stream; the redis lock; the
// order events, which the relay job publishes under the jobs' lock on
// Redis; Idempotency-Keys; and the buyer rate limit.
func TestServeOnRedisSentinel(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	r := testinfra.StartRedisSentinel(t)
	t.Run("lua-events-jobs", func(t *testing.T) {
		s := newSale(t, "lua", r.Addr(), sentinelEnv(r))
		s.sellExactly(t, "sentinel-lua")
		stream := s.Prefix + "events"
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			n, err := s.RDB.XLen(t.Context(), stream).Result()
			if err == nil && n >= 20 {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%d events in %s, want the 20 orders' (%v)", n, stream, err)
			}
		}
	})
	t.Run("redis-lock", func(t *testing.T) {
		newSale(t, "redis", r.Addr(), sentinelEnv(r)).sellExactly(t, "sentinel-redis")
	})
	t.Run("keys-and-rate", func(t *testing.T) {
		s := newSale(t, "atomic", r.Addr(), sentinelEnv(r), "SHOP_BUYER_RATE=2/m")
		s.shape = &burstShape{units: 5}
		s.putStock(t, "sentinel-keys")
		order := func(key string) shoptest.Reply {
			t.Helper()
			res, err := shoptest.Post(t.Context(), http.DefaultClient, s.Shops[0].Base+"/api/v1/orders", key, `{"sku":"sentinel-keys","user_id":"ann","quantity":1}`)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		first := order("ann-1")
		if again := order("ann-1"); first.Code != http.StatusCreated || again.Code != http.StatusCreated || again.ID != first.ID || !again.Replayed {
			t.Errorf("an order and its retry with the same key: %+v, %+v; want one order, replayed", first, again)
		}
		order("ann-2") // ann's third request in a minute, or her second if a replay is not counted
		if over := order("ann-3"); over.Code != http.StatusTooManyRequests {
			t.Errorf("ann's fourth request in a minute, over SHOP_BUYER_RATE=2/m: %+v; want 429", over)
		}
	})
}

// TestFaultSentinelFailover kills the master (SIGKILL) under each
// strategy that keeps something in Redis, mid-burst, on one setup: lua its
// stock, redis its locks, atomic its Idempotency-Keys. The replica has
// fallen behind first, so the promoted replica lacks the last writes. The
// checks are failOver's; each logs the share of buyers answered 503 and
// the longest time without a sale. A requested failover (SENTINEL
// FAILOVER) is TestLuaStateBehindSentinel's, in internal/lua: a loaded
// machine puts Sentinels in TILT mode, in which they start no failover
// on request for 30 s, and a burst does not wait that long.
func TestFaultSentinelFailover(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	began := time.Now()
	r := testinfra.StartRedisSentinel(t)
	for _, strategy := range []string{"lua", "redis", "atomic"} {
		t.Run(strategy, func(t *testing.T) {
			s := newSale(t, strategy, r.Addr(), sentinelEnv(r))
			s.failOver(t, r, "sfo-"+strategy+"-kill", "kill")
			r.Restore()
			s.sellExactly(t, "sfo-"+strategy+"-after")
		})
	}
	t.Logf("wall time %v", time.Since(began).Round(100*time.Millisecond))
}
