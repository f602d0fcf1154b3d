package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"io"
	"os"
	"path/filepath"
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

// loadCase is an environment, and what Load must say of it: an error that
// mentions err, or none when err is empty.
type loadCase struct {
	name string
	env  map[string]string
	err  string
}

// loadAll loads each case's environment as a subtest.
func loadAll(t *testing.T, cases []loadCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.env)
			if tt.err == "" && err != nil {
				t.Fatal(err)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.err)
			}
		})
	}
}

// TestAddrLists: the settings that take several addresses, Redlock's
// masters and a Redis Cluster's seed nodes.
func TestAddrLists(t *testing.T) {
	t.Parallel()
	redlock := func(c config.Config) []string { return c.RedlockAddrs }
	tests := []struct {
		name, env, addrs string
		got              func(config.Config) []string
		want             []string
		err              string
	}{
		{"three", "SHOP_REDLOCK_ADDRS", "a:1, b:2,c:3", redlock, []string{"a:1", "b:2", "c:3"}, ""},
		{"none", "SHOP_REDLOCK_ADDRS", "", redlock, nil, ""},
		{"not host:port", "SHOP_REDLOCK_ADDRS", "a:1,b,c:3", redlock, nil, `SHOP_REDLOCK_ADDRS: "b" is not host:port`},
		{"twice", "SHOP_REDLOCK_ADDRS", "a:1,b:2,a:1", redlock, nil, `SHOP_REDLOCK_ADDRS: "a:1" is listed twice`},
		{"one redis", "SHOP_REDIS_ADDR", "r:1", config.Config.RedisAddrs, []string{"r:1"}, ""},
		{"redis cluster", "SHOP_REDIS_ADDR", "r:1, r:2,r:3", config.Config.RedisAddrs, []string{"r:1", "r:2", "r:3"}, ""},
		{"cluster node not host:port", "SHOP_REDIS_ADDR", "r:1,r", config.Config.RedisAddrs, nil, `SHOP_REDIS_ADDR: "r" is not host:port`},
		{"cluster node twice", "SHOP_REDIS_ADDR", "r:1,r:1", config.Config.RedisAddrs, nil, `SHOP_REDIS_ADDR: "r:1" is listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, map[string]string{tt.env: tt.addrs})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.got(c); strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("%s read as %q, want %q", tt.env, got, tt.want)
			}
		})
	}
}

// TestEnvironRoundTrip: a Config written out as SHOP_* variables, as bench
// hands it to its children, reads back the same.
func TestEnvironRoundTrip(t *testing.T) {
	t.Parallel()
	want, err := load(t, map[string]string{"SHOP_REDLOCK_ADDRS": "a:1,b:2,c:3", "SHOP_ZK_ADDRS": "zk:2181",
		"SHOP_LOCK_TTL": "1500ms", "SHOP_PER_USER_LIMIT": "2", "SHOP_ADMIN_TOKEN": "t", "SHOP_DEBUG_ADDR": "",
		"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_SECRET": strings.Repeat("s", 32), "SHOP_JWT_ISSUER": "i", "SHOP_JWT_AUDIENCE": "a", "SHOP_BUYER_RATE": "5/s",
		"SHOP_HTTP_READ_TIMEOUT": "1s", "SHOP_HTTP_WRITE_TIMEOUT": "12s", "SHOP_HTTP_IDLE_TIMEOUT": "30s", "SHOP_ALLOW_RESET": "true"})
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

// TestHTTPSettings: the listener's timeouts default to what a shop in
// production needs, and a write timeout that would cut off the answer of a
// request within its deadline stops the shop at start, naming both
// settings.
func TestHTTPSettings(t *testing.T) {
	t.Parallel()
	c, err := load(t, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ReadTimeout != 5*time.Second || c.WriteTimeout != 15*time.Second || c.IdleTimeout != 2*time.Minute || c.AllowReset {
		t.Errorf("defaults: read %s, write %s, idle %s, allow reset %v", c.ReadTimeout, c.WriteTimeout, c.IdleTimeout, c.AllowReset)
	}
	tests := []loadCase{
		{"short timeouts", map[string]string{"SHOP_HTTP_READ_TIMEOUT": "1s", "SHOP_HTTP_WRITE_TIMEOUT": "3s", "SHOP_REQUEST_TIMEOUT": "2s"}, ""},
		{"write within the request's deadline", map[string]string{"SHOP_REQUEST_TIMEOUT": "15s"}, "SHOP_HTTP_WRITE_TIMEOUT: 15s must be longer than SHOP_REQUEST_TIMEOUT (15s)"},
		{"write within the read timeout", map[string]string{"SHOP_HTTP_READ_TIMEOUT": "20s"}, "SHOP_HTTP_WRITE_TIMEOUT: 15s must be longer than SHOP_HTTP_READ_TIMEOUT (20s)"},
		{"bad read timeout", map[string]string{"SHOP_HTTP_READ_TIMEOUT": "slow"}, "SHOP_HTTP_READ_TIMEOUT"},
		{"tiny idle timeout", map[string]string{"SHOP_HTTP_IDLE_TIMEOUT": "1ms"}, "SHOP_HTTP_IDLE_TIMEOUT: 1ms is below the minimum"},
		{"allow reset", map[string]string{"SHOP_ALLOW_RESET": "true"}, ""},
		{"bad allow reset", map[string]string{"SHOP_ALLOW_RESET": "yes please"}, `SHOP_ALLOW_RESET: "yes please" is neither true nor false`},
		{"lua's claim within the request's deadline", map[string]string{"SHOP_STRATEGY": "lua", "SHOP_CLAIM_IDLE": "10s"}, "SHOP_CLAIM_IDLE: 10s must be longer than SHOP_REQUEST_TIMEOUT (10s)"},
		{"another strategy's claim", map[string]string{"SHOP_STRATEGY": "atomic", "SHOP_CLAIM_IDLE": "10s"}, ""},
	}
	loadAll(t, tests)
	// shop echo serves the same HTTP stack: it takes the listener's
	// settings as flags, and no other.
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	read := config.Flags(fs, func(k string) string { return map[string]string{"SHOP_HTTP_IDLE_TIMEOUT": "1m"}[k] }, nil, config.ForEcho)
	if err := fs.Parse([]string{"--http", "127.0.0.1:0", "--http-read-timeout", "2s"}); err != nil {
		t.Fatal(err)
	}
	c, err = read()
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:0" || c.ReadTimeout != 2*time.Second || c.WriteTimeout != 15*time.Second || c.IdleTimeout != time.Minute {
		t.Errorf("echo's config %+v", c)
	}
	if fs.Lookup("mysql") != nil || fs.Lookup("debug") != nil {
		t.Error("echo's flags include serve's own")
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
	read := config.Flags(fs, func(k string) string { return env[k] }, strategies, config.ForLoad)
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

// TestBuyerSettings: buyer authentication and the buyer rate are checked
// at start, with errors that name the setting.
func TestBuyerSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeKey := func(name string, curve elliptic.Curve) string {
		key, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p256, p384 := writeKey("p256.pem", elliptic.P256()), writeKey("p384.pem", elliptic.P384())
	notKey := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notKey, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := strings.Repeat("s", 32)
	tests := []loadCase{
		{"default", map[string]string{}, ""},
		{"jwt with a secret", map[string]string{"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_SECRET": secret, "SHOP_JWT_ISSUER": "i", "SHOP_JWT_AUDIENCE": "a"}, ""},
		{"jwt with a P-256 key", map[string]string{"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_PUBLIC_KEY": p256}, ""},
		{"unknown auth", map[string]string{"SHOP_BUYER_AUTH": "basic"}, `SHOP_BUYER_AUTH: "basic" is neither jwt nor none`},
		{"jwt without a key", map[string]string{"SHOP_BUYER_AUTH": "jwt"}, "SHOP_BUYER_AUTH=jwt needs SHOP_JWT_SECRET (HS256) or SHOP_JWT_PUBLIC_KEY"},
		{"short secret", map[string]string{"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_SECRET": "short"}, "SHOP_JWT_SECRET: buyer: the HS256 secret has 5 bytes, at least 32"},
		{"secret and key", map[string]string{"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_SECRET": secret, "SHOP_JWT_PUBLIC_KEY": p256}, "are both set"},
		{"no key file", map[string]string{"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_PUBLIC_KEY": filepath.Join(dir, "missing.pem")}, "SHOP_JWT_PUBLIC_KEY: open"},
		{"not a key", map[string]string{"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_PUBLIC_KEY": notKey}, "holds no PEM RSA or ECDSA public key"},
		{"P-384 key", map[string]string{"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_PUBLIC_KEY": p384}, "ES256 needs a P-256 key"},
		{"rate", map[string]string{"SHOP_BUYER_RATE": "5/s"}, ""},
		{"bad rate", map[string]string{"SHOP_BUYER_RATE": "fast"}, `SHOP_BUYER_RATE: "fast" is not a rate such as 5/s`},
		{"rate per day", map[string]string{"SHOP_BUYER_RATE": "5/d"}, "SHOP_BUYER_RATE"},
		{"negative rate", map[string]string{"SHOP_BUYER_RATE": "-1/s"}, "SHOP_BUYER_RATE"},
		{"one sentinel", map[string]string{"SHOP_REDIS_SENTINEL_MASTER": "shop", "SHOP_REDIS_ADDR": "127.0.0.1:26379"}, ""},
		{"sentinels", map[string]string{"SHOP_REDIS_SENTINEL_MASTER": "shop", "SHOP_REDIS_ADDR": "10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379"}, ""},
		{"sentinel twice", map[string]string{"SHOP_REDIS_SENTINEL_MASTER": "shop", "SHOP_REDIS_ADDR": "10.0.0.1:26379,10.0.0.1:26379"}, `SHOP_REDIS_ADDR: "10.0.0.1:26379" is listed twice`},
	}
	loadAll(t, tests)
	// An empty SHOP_REDIS_ADDR comes only from a flag: the variable's empty
	// value is its default.
	_, err := config.Load([]string{"--redis="}, func(k string) string {
		return map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:3306)/d", "SHOP_BUYER_RATE": "5/s"}[k]
	}, strategies, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "SHOP_BUYER_RATE needs Redis") || strings.Contains(err.Error(), "not host:port") {
		t.Errorf("err = %v, want SHOP_BUYER_RATE needs Redis alone", err)
	}
	_, err = config.Load([]string{"--redis=", "--redis-sentinel-master=shop"}, func(k string) string {
		return map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:3306)/d"}[k]
	}, strategies, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--redis-sentinel-master needs the addresses of its Sentinels in --redis") {
		t.Errorf("err = %v, want --redis-sentinel-master, as given, needs its Sentinels", err)
	}
	if r, err := config.ParseRate("100/m"); err != nil || r != (config.Rate{N: 100, Period: time.Minute}) || r.String() != "100/m" {
		t.Errorf("100/m: %+v %v", r, err)
	}
}
