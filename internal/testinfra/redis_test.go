package testinfra_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/testinfra"
)

func TestRedis(t *testing.T) {
	t.Parallel()
	var key string
	t.Run("namespace", func(t *testing.T) {
		a, b := testinfra.Redis(t), testinfra.Redis(t)
		if a.Prefix == b.Prefix || !strings.HasPrefix(a.Prefix, "test:") {
			t.Errorf("prefixes %q and %q: want two different test:<random>: prefixes", a.Prefix, b.Prefix)
		}
		key = a.Prefix + "stock:sku-1"
		if err := newRedis(t, a.Addr).Set(t.Context(), key, 10, 0).Err(); err != nil {
			t.Fatal(err)
		}
	})

	// The subtest's cleanup has run.
	n, err := newRedis(t, testinfra.Redis(t).Addr).Exists(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("key %s still exists after cleanup", key)
	}
}

func TestStartRedis(t *testing.T) {
	t.Parallel()
	s := testinfra.StartRedis(t)
	c := newRedis(t, s.Addr())
	if err := c.Set(t.Context(), "lock", "token", 0).Err(); err != nil {
		t.Fatal(err)
	}

	s.Stop()
	s.Start()
	if got, err := c.Get(t.Context(), "lock").Result(); got != "token" {
		t.Errorf("after Stop and Start: lock = %q, %v; want the saved token", got, err)
	}

	if err := c.Set(t.Context(), "lock2", "token2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Start()
	if got, err := c.Get(t.Context(), "lock").Result(); got != "token" {
		t.Errorf("after Kill and Start: lock = %q, %v; want the token saved at Stop", got, err)
	}
	if got, err := c.Get(t.Context(), "lock2").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("after Kill and Start: lock2 = %q, %v; want it lost", got, err)
	}
}

func newRedis(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReplicatedRedisCluster: a key written and replicated survives both
// ways of failing its master, and the cluster serves it from the promoted
// replica each time; a killed master comes back as a replica.
func TestReplicatedRedisCluster(t *testing.T) {
	t.Parallel()
	c := testinfra.StartReplicatedRedisCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Seeds})
	t.Cleanup(func() { cc.Close() })
	if err := cc.Set(t.Context(), "{sale}k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c.AwaitSynced()
	for _, fail := range []struct {
		name string
		do   func(master string) string
	}{{"kill", c.Kill}, {"failover", c.Failover}} {
		master := c.MasterOf("{sale}k")
		promoted := fail.do(master)
		if now := c.MasterOf("{sale}k"); now != promoted || now == master {
			t.Errorf("%s of %s: the key's master is %s, want the promoted %s", fail.name, master, now, promoted)
		}
		cc.ReloadState(t.Context())
		if got, err := cc.Get(t.Context(), "{sale}k").Result(); got != "v" {
			t.Errorf("after %s: %q, %v; want the replicated value", fail.name, got, err)
		}
		c.Restore()
	}
}
