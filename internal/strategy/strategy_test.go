package strategy_test

import (
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/config"
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

// TestRegistry: every entry has a unique name, a constructor and a ceiling,
// and All cannot change the registry.
func TestRegistry(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	all := strategy.All()
	for _, s := range all {
		if s.Name == "" || seen[s.Name] || (s.New == nil) == (s.Lock == nil) || s.Ceiling == "" {
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
