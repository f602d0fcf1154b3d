package config_test

import (
	"io"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/config"
)

var strategies = []string{"atomic", "redis", "redlock", "zookeeper"}

func load(t *testing.T, env map[string]string) (config.Config, error) {
	t.Helper()
	env["SHOP_MYSQL_DSN"] = "u:p@tcp(127.0.0.1:3306)/d"
	return config.Load(nil, func(k string) string { return env[k] }, strategies, io.Discard)
}

func TestRedlockAddrs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, addrs string
		want        []string
		err         string
	}{
		{"three", "a:1, b:2,c:3", []string{"a:1", "b:2", "c:3"}, ""},
		{"none", "", nil, ""},
		{"not host:port", "a:1,b,c:3", nil, `SHOP_REDLOCK_ADDRS: "b" is not host:port`},
		{"twice", "a:1,b:2,a:1", nil, `SHOP_REDLOCK_ADDRS: "a:1" is listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, map[string]string{"SHOP_REDLOCK_ADDRS": tt.addrs})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(c.RedlockAddrs, " ") != strings.Join(tt.want, " ") {
				t.Errorf("RedlockAddrs = %q, want %q", c.RedlockAddrs, tt.want)
			}
		})
	}
}

// TestRequire: a strategy that needs a server the config does not name is a
// config error that names the setting.
func TestRequire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		strategy string
		needs    []string
		err      string
	}{
		{"mysql only", map[string]string{}, "atomic", nil, ""},
		{"redis has a default", map[string]string{}, "redis", []string{"redis"}, ""},
		{"redlock unset", map[string]string{}, "redlock", []string{"redlock"}, "strategy redlock needs SHOP_REDLOCK_ADDRS: at least 3"},
		{"redlock with two", map[string]string{"SHOP_REDLOCK_ADDRS": "a:1,b:2"}, "redlock", []string{"redlock"}, "got 2"},
		{"redlock with three", map[string]string{"SHOP_REDLOCK_ADDRS": "a:1,b:2,c:3"}, "redlock", []string{"redlock"}, ""},
		{"zookeeper unset", map[string]string{}, "zookeeper", []string{"zookeeper"}, "strategy zookeeper needs SHOP_ZK_ADDRS"},
		{"zookeeper set", map[string]string{"SHOP_ZK_ADDRS": "zk:2181"}, "zookeeper", []string{"zookeeper"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Require(tt.strategy, tt.needs)
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("Require: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("Require: %v, want it to mention %q", err, tt.err)
			}
		})
	}
}
