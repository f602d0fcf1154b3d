// Package strategytest configures a shop for a strategy in a test: real
// servers from internal/testinfra, in a namespace of the test's own, for
// every server the strategy needs; under -short, the embedded backends
// where the strategy can run on them (see testinfra.Embedded).
package strategytest

import (
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/testinfra"
)

// provide starts or finds, for one need, a server of the test's own and
// returns the SHOP_* settings that name it.
var provide = map[backend.Need]func(testing.TB) map[string]string{
	backend.Redis: func(testing.TB) map[string]string { return nil }, // the shop's own, from Env
	backend.Redlock: func(t testing.TB) map[string]string {
		var masters []string
		for range backend.MinRedlockMasters { // independent masters: servers of the test's own
			masters = append(masters, testinfra.OwnRedis(t))
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
// s the servers it needs beyond MySQL and Redis. Under -short, it skips t
// for a strategy that cannot run on SQLite.
func NeedsEnv(t testing.TB, s strategy.Strategy) map[string]string {
	t.Helper()
	if testinfra.Embedded() && s.Embedded.Skip != "" {
		t.Skipf("strategytest: -short runs on SQLite, and strategy %s cannot: %s", s.Name, s.Embedded.Skip)
	}
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
	needs := NeedsEnv(t, s) // first: it may skip t
	r := testinfra.Redis(t)
	env := map[string]string{"SHOP_MYSQL_DSN": testinfra.MySQL(t), "SHOP_REDIS_ADDR": r.Addr, "SHOP_REDIS_PREFIX": r.Prefix}
	maps.Copy(env, needs)
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

// Each runs test for every strategy of strategies, each in a parallel
// subtest named after it, and fails t if every one that ran skipped: a
// suite whose every case skipped has shown nothing, and must not pass.
func Each(t *testing.T, strategies []strategy.Strategy, test func(t *testing.T, s strategy.Strategy)) {
	t.Helper()
	var started, ran atomic.Int32
	t.Cleanup(func() { // once every subtest has finished
		if n := started.Load(); n > 0 && ran.Load() == 0 {
			t.Errorf("strategytest: every strategy that ran (%d) skipped: the test has shown nothing", n)
		}
	})
	for _, s := range strategies {
		t.Run(s.Name, func(t *testing.T) {
			started.Add(1)
			t.Cleanup(func() {
				if !t.Skipped() {
					ran.Add(1)
				}
			})
			t.Parallel()
			test(t, s)
		})
	}
}

// Guard builds the guard of the named strategy through the registry, on
// b, as `shop serve` builds it with the settings of env (SHOP_MYSQL_DSN
// among them) and its defaults for the rest: for a test that opens its
// backends itself, such as a database whose row it holds or a Redis it
// stops.
func Guard(t testing.TB, name string, b *backend.Backends, env map[string]string) stock.Guard {
	t.Helper()
	return Placement(t, name, b, env).Guard
}

// Placement is Guard's whole placement: what the order service places
// through.
func Placement(t testing.TB, name string, b *backend.Backends, env map[string]string) order.Placement {
	t.Helper()
	s, err := strategy.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	env = maps.Clone(env)
	env["SHOP_STRATEGY"] = name
	p, err := s.Build(b, Load(t, env))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Open opens the backends that s needs with cfg, closed at cleanup, and
// builds s's placement on them through the registry: one instance of the
// shop, as a separate process would have, with connections and locks of
// its own.
func Open(t testing.TB, s strategy.Strategy, cfg config.Config) (*backend.Backends, order.Placement) {
	t.Helper()
	b := Backends(t, s, cfg)
	p, err := s.Build(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, p
}

// Backends opens the backends that s needs on cfg, closed when t ends.
func Backends(t testing.TB, s strategy.Strategy, cfg config.Config) *backend.Backends {
	t.Helper()
	b, err := backend.Open(t.Context(), cfg, s.Needs, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Environ returns env as KEY=value lines, in a stable order.
func Environ(env map[string]string) []string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		lines = append(lines, k+"="+env[k])
	}
	return lines
}
