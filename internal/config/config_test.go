package config_test

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

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

// TestEnvironRoundTrip: a Config written out as SHOP_* variables, as bench
// hands it to its children, reads back the same.
func TestEnvironRoundTrip(t *testing.T) {
	t.Parallel()
	want, err := load(t, map[string]string{"SHOP_REDLOCK_ADDRS": "a:1,b:2,c:3", "SHOP_ZK_ADDRS": "zk:2181",
		"SHOP_LOCK_TTL": "1500ms", "SHOP_PER_USER_LIMIT": "2", "SHOP_ADMIN_TOKEN": "t", "SHOP_DEBUG_ADDR": ""})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range want.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	got, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v\nwant      %+v", got, want)
	}
}

// TestServerFlags: demo and bench take the server addresses as flags that
// default to their variables alone, so that an unset server stays empty
// (embedded, or done without) rather than taking serve's default; the rest
// of the Config comes from the variables and defaults as for serve.
func TestServerFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SHOP_ZK_ADDRS": "zk:2181", "SHOP_LOCK_TTL": "3s"}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	read := config.Flags(fs, func(k string) string { return env[k] }, strategies, true)
	if err := fs.Parse([]string{"--redlock", "a:1,b:2,c:3"}); err != nil {
		t.Fatal(err)
	}
	c, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if c.RedisAddr != "" || c.MySQLDSN != "" || len(c.RedlockAddrs) != 3 || len(c.ZKAddrs) != 1 || c.LockTTL != 3*time.Second || c.RedisPrefix != "shop:" {
		t.Errorf("config %+v", c)
	}
	if fs.Lookup("strategy") != nil || fs.Lookup("http") != nil {
		t.Error("demo's flags include serve's own")
	}
}
