package strategy_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/strategy"
)

// TestRequire: a strategy that needs a server the config does not name is a
// config error that names the setting.
func TestRequire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      config.Config
		strategy string
		err      string
	}{
		{"mysql only", config.Config{}, "atomic", ""},
		{"redis set", config.Config{RedisAddr: "r:6379"}, "redis", ""},
		{"redis unset", config.Config{}, "redis", "strategy redis needs a Redis server (--redis or SHOP_REDIS_ADDR)"},
		{"redlock unset", config.Config{}, "redlock", "config: strategy redlock needs SHOP_REDLOCK_ADDRS: at least 3 independent Redis masters, got 0"},
		{"redlock with two", config.Config{RedlockAddrs: []string{"a:1", "b:2"}}, "redlock", "got 2"},
		{"redlock with three", config.Config{RedlockAddrs: []string{"a:1", "b:2", "c:3"}}, "redlock", ""},
		{"zookeeper unset", config.Config{}, "zookeeper", "strategy zookeeper needs a ZooKeeper server (--zk or SHOP_ZK_ADDRS)"},
		{"zookeeper set", config.Config{ZKAddrs: []string{"zk:2181"}}, "zookeeper", ""},
		{"etcd unset", config.Config{}, "etcd", "strategy etcd needs an etcd server (--etcd or SHOP_ETCD_ADDRS)"},
		{"etcd set", config.Config{EtcdAddrs: []string{"etcd:2379"}}, "etcd", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := strategy.Lookup(tt.strategy)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Require(tt.cfg)
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("Require: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("Require: %v, want it to mention %q", err, tt.err)
			}
		})
	}
}

// TestRegistry: every entry has a unique name, one constructor (New, Lock
// or Own) and a ceiling,
// and All cannot change the registry.
func TestRegistry(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	all := strategy.All()
	for _, s := range all {
		built := 0
		for _, set := range []bool{s.New != nil, s.Lock != nil, s.Own != nil} {
			if set {
				built++
			}
		}
		if s.Name == "" || seen[s.Name] || built != 1 || s.Ceiling == "" {
			t.Errorf("entry %q: empty or repeated name, not one constructor, or no ceiling", s.Name)
		}
		seen[s.Name] = true
	}
	all[0].Name = "changed"
	if _, err := strategy.Lookup("changed"); err == nil {
		t.Error("a caller changed the registry through All")
	}
	if _, err := strategy.Lookup("magic"); err == nil || !strings.Contains(err.Error(), `unknown strategy "magic"`) {
		t.Errorf("Lookup(magic) = %v", err)
	}
}

// TestRegistryQueues: every guard stands behind stock.Queued, but
// none's; a placement of its own does not, and has its placer. They are
// built on embedded backends: SQLite and miniredis.
func TestRegistryQueues(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	cfg := config.Config{MySQLDSN: db.SQLitePrefix + filepath.Join(t.TempDir(), "shop.db"), RedisAddr: m.Addr(), ClaimIdle: time.Minute}
	b, err := backend.Open(t.Context(), cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, s := range strategy.All() {
		if s.NoQueue != (s.Name == "none") {
			t.Errorf("%s: NoQueue %v; only none may do without the queue", s.Name, s.NoQueue)
		}
		if s.Lock != nil {
			continue // its lock needs its server; Build puts stock.Locked behind the queue
		}
		p, err := s.Build(b, cfg)
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		queued := p.FirstRead != nil
		if want := s.Own == nil && !s.NoQueue; queued != want {
			t.Errorf("%s: behind the queue %v, want %v: a placement of its own queues its buyers itself", s.Name, queued, want)
		}
		if s.Own != nil && p.Placer == nil {
			t.Errorf("%s: its own placement has no placer", s.Name)
		}
	}
}
