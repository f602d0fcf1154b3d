package testinfra

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go/wait"
)

var sharedRedis = shared{
	name:      "Redis",
	env:       "SHOP_TEST_REDIS_ADDR",
	container: onceContainer("redis:7", "6379/tcp", wait.ForLog("Ready to accept connections")),
}

// RedisNamespace is a test's share of a Redis server.
type RedisNamespace struct {
	Addr   string // host:port
	Prefix string // "test:<random>:"; the test's keys must start with it
}

// Redis returns the address of a real Redis server and a key prefix unique
// to this test. Keys under the prefix are deleted at cleanup. Under -short
// the server is a miniredis that the test binary's tests share (see
// Embedded).
func Redis(t testing.TB) RedisNamespace {
	t.Helper()
	ns := RedisNamespace{Prefix: randomName("test:") + ":"}
	if Embedded() {
		var err error
		if ns.Addr, err = sharedMiniredis(); err != nil {
			t.Fatalf("testinfra: miniredis: %v", err)
		}
	} else {
		ns.Addr = sharedRedis.locate(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := exchange(ctx, ns.Addr, "PING\r\n", "+PONG"); err != nil {
			t.Fatalf("testinfra: Redis at %s: %v", ns.Addr, err)
		}
	}
	cleanup(t, "delete Redis keys "+ns.Prefix+"*", func(ctx context.Context) error { return deleteKeys(ctx, ns) })
	return ns
}

func deleteKeys(ctx context.Context, ns RedisNamespace) error {
	c := redis.NewClient(&redis.Options{Addr: ns.Addr})
	defer c.Close()
	var keys []string
	iter := c.Scan(ctx, 0, ns.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return err
	}
	return c.Unlink(ctx, keys...).Err()
}

// StartRedis starts a private redis-server on a free loopback port, with
// args added to its command line; it is killed at cleanup.
//
// Stop saves the data, and Start loads what was last saved. So Kill loses
// every write since the last Stop, like the crash of a master without
// persistence: the case where Redlock can grant a lock twice.
func StartRedis(t testing.TB, args ...string) *Server {
	t.Helper()
	return startOne(t, func() *Server { return redisServer(t, freeAddr(t), args...) })
}

// redisServer prepares a redis-server of the test's own on addr, with args
// added.
func redisServer(t testing.TB, addr string, args ...string) *Server {
	t.Helper()
	skipShort(t, "a redis-server process of the test's own")
	bin := lookPath(t, "redis-server", "redis-server")
	dir := t.TempDir()
	s := newServer(t, "redis-server", addr, dir, 30*time.Second)
	_, port, _ := net.SplitHostPort(s.addr)
	s.command = func() *exec.Cmd {
		return exec.Command(bin, append([]string{"--bind", "127.0.0.1", "--port", port, "--dir", dir,
			"--save", "", "--appendonly", "no", "--shutdown-on-sigterm", "save"}, args...)...)
	}
	s.ready = func(ctx context.Context) error { return exchange(ctx, s.addr, "PING\r\n", "+PONG") }
	return s
}

// StartRedisCluster starts a Redis Cluster of three masters, no replicas,
// private to the test, and returns their addresses once every node says
// the cluster is ok. redis-cli comes with redis-server.
func StartRedisCluster(t testing.TB) []string {
	t.Helper()
	return startCluster(t, 0, "--cluster-node-timeout", "5000").Seeds
}

// SKUsOnMasters returns n SKUs, named <name>-<i>, whose lua keys (hash
// tag {sku}) live on n different masters of the cluster: a cart of them
// is a saga.
func SKUsOnMasters(t testing.TB, cc *redis.ClusterClient, name string, n int) []string {
	t.Helper()
	seen := map[string]bool{}
	var skus []string
	for i := 0; len(skus) < n; i++ {
		if i > 1000 {
			t.Fatalf("testinfra: no %d SKUs on %d masters", n, n)
		}
		sku := fmt.Sprint(name, "-", i)
		m, err := cc.MasterForKey(context.Background(), "{"+sku+"}")
		if err != nil {
			t.Fatal(err)
		}
		if addr := m.Options().Addr; !seen[addr] {
			seen[addr] = true
			skus = append(skus, sku)
		}
	}
	return skus
}
