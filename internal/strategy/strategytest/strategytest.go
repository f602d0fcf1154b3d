// Package strategytest configures a shop for a strategy in a test: real
// servers from internal/testinfra, in a namespace of the test's own, for
// every server the strategy needs.
package strategytest

import (
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/testinfra"
)

// provide starts or finds, for one need, a server of the test's own and
// returns the SHOP_* settings that name it.
var provide = map[backend.Need]func(testing.TB) map[string]string{
	backend.Redis: func(testing.TB) map[string]string { return nil }, // the shop's own, from Env
	backend.Redlock: func(t testing.TB) map[string]string {
		var masters []string
		for range backend.MinRedlockMasters { // independent masters: private servers
			masters = append(masters, testinfra.StartRedis(t).Addr())
		}
		return map[string]string{"SHOP_REDLOCK_ADDRS": strings.Join(masters, ",")}
	},
	backend.ZooKeeper: func(t testing.TB) map[string]string {
		ns := testinfra.ZooKeeper(t)
		return map[string]string{"SHOP_ZK_ADDRS": strings.Join(ns.Addrs, ","), "SHOP_ZK_ROOT": ns.Root}
	},
	backend.Etcd: func(t testing.TB) map[string]string {
		ns := testinfra.Etcd(t)
		return map[string]string{"SHOP_ETCD_ADDRS": strings.Join(ns.Endpoints, ","), "SHOP_ETCD_PREFIX": ns.Prefix}
	},
}

// NeedsEnv returns the SHOP_* settings, SHOP_STRATEGY among them, that give
// s the servers it needs beyond MySQL and Redis.
func NeedsEnv(t testing.TB, s strategy.Strategy) map[string]string {
	t.Helper()
	env := map[string]string{"SHOP_STRATEGY": s.Name}
	for _, n := range s.Needs {
		p, ok := provide[n]
		if !ok {
			t.Fatalf("strategytest: strategy %s needs %s, which no test server provides", s.Name, n)
		}
		maps.Copy(env, p(t))
	}
	return env
}

// Env returns NeedsEnv with a fresh MySQL database and a Redis key prefix
// of the test's own.
func Env(t testing.TB, s strategy.Strategy) map[string]string {
	t.Helper()
	r := testinfra.Redis(t)
	env := map[string]string{"SHOP_MYSQL_DSN": testinfra.MySQL(t), "SHOP_REDIS_ADDR": r.Addr, "SHOP_REDIS_PREFIX": r.Prefix}
	maps.Copy(env, NeedsEnv(t, s))
	return env
}

// Config is Env read as `shop serve` reads it.
func Config(t testing.TB, s strategy.Strategy) config.Config {
	t.Helper()
	return Load(t, Env(t, s))
}

// Load reads env as `shop serve` reads its environment.
func Load(t testing.TB, env map[string]string) config.Config {
	t.Helper()
	cfg, err := config.Load(nil, func(k string) string { return env[k] }, strategy.Names(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Environ returns env as KEY=value lines, in a stable order.
func Environ(env map[string]string) []string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		lines = append(lines, k+"="+env[k])
	}
	return lines
}
