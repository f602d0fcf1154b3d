// Package config reads the shop's one Config from SHOP_* environment
// variables and command-line flags (flags win), validates it, and masks its
// secrets when it is logged.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/db"
)

// Config is everything `shop serve` needs.
type Config struct {
	HTTPAddr       string        // SHOP_HTTP_ADDR
	DebugAddr      string        // SHOP_DEBUG_ADDR; empty disables the debug listener
	MySQLDSN       string        // SHOP_MYSQL_DSN
	RedisAddr      string        // SHOP_REDIS_ADDR
	RedisPrefix    string        // SHOP_REDIS_PREFIX, put before every key the shop writes
	ZKAddrs        []string      // SHOP_ZK_ADDRS, comma-separated
	ZKRoot         string        // SHOP_ZK_ROOT, the znode that holds the locks
	RedlockAddrs   []string      // SHOP_REDLOCK_ADDRS, comma-separated independent Redis masters
	Strategy       string        // SHOP_STRATEGY
	AdminToken     string        // SHOP_ADMIN_TOKEN; empty refuses the admin endpoints
	LockTTL        time.Duration // SHOP_LOCK_TTL
	RequestTimeout time.Duration // SHOP_REQUEST_TIMEOUT
	IdempotencyTTL time.Duration // SHOP_IDEMPOTENCY_TTL
	PerUserLimit   int           // SHOP_PER_USER_LIMIT; 0 means none
}

// Getenv looks up one environment variable, as os.Getenv does.
type Getenv func(string) string

// Load builds a Config from defaults, then the environment, then args, and
// validates it. strategies lists the names the caller can build.
func Load(args []string, getenv Getenv, strategies []string, usage io.Writer) (Config, error) {
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	var c Config
	var zk, redlock, ttl, timeout, idemTTL, limit string
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.HTTPAddr, "http", env("SHOP_HTTP_ADDR", ":8080"), "public HTTP listen address (SHOP_HTTP_ADDR)")
	fs.StringVar(&c.DebugAddr, "debug", env("SHOP_DEBUG_ADDR", "127.0.0.1:6060"), "pprof listen address, empty to disable (SHOP_DEBUG_ADDR)")
	fs.StringVar(&c.MySQLDSN, "mysql", env("SHOP_MYSQL_DSN", ""), "MySQL DSN, user:pass@tcp(host:port)/db, or sqlite:FILE for an embedded database (SHOP_MYSQL_DSN)")
	fs.StringVar(&c.RedisAddr, "redis", env("SHOP_REDIS_ADDR", "127.0.0.1:6379"), "Redis address (SHOP_REDIS_ADDR)")
	fs.StringVar(&c.RedisPrefix, "redis-prefix", env("SHOP_REDIS_PREFIX", "shop:"), "prefix of every Redis key the shop writes (SHOP_REDIS_PREFIX)")
	fs.StringVar(&zk, "zk", env("SHOP_ZK_ADDRS", ""), "ZooKeeper addresses, comma-separated (SHOP_ZK_ADDRS)")
	fs.StringVar(&c.ZKRoot, "zk-root", env("SHOP_ZK_ROOT", "/stockguard/locks"), "znode under which the zookeeper strategy keeps its locks (SHOP_ZK_ROOT)")
	fs.StringVar(&redlock, "redlock", env("SHOP_REDLOCK_ADDRS", ""), "independent Redis masters for the redlock strategy, comma-separated, at least 3 (SHOP_REDLOCK_ADDRS)")
	fs.StringVar(&c.Strategy, "strategy", env("SHOP_STRATEGY", "atomic"), "stock strategy: "+strings.Join(strategies, ", ")+" (SHOP_STRATEGY)")
	fs.StringVar(&c.AdminToken, "admin-token", env("SHOP_ADMIN_TOKEN", ""), "bearer token for the admin endpoints; empty refuses them (SHOP_ADMIN_TOKEN)")
	fs.StringVar(&ttl, "lock-ttl", env("SHOP_LOCK_TTL", "10s"), "lease TTL of the distributed locks (SHOP_LOCK_TTL)")
	fs.StringVar(&timeout, "request-timeout", env("SHOP_REQUEST_TIMEOUT", "10s"), "deadline of one API request (SHOP_REQUEST_TIMEOUT)")
	fs.StringVar(&idemTTL, "idempotency-ttl", env("SHOP_IDEMPOTENCY_TTL", "24h"), "how long a response is kept for replay under its Idempotency-Key (SHOP_IDEMPOTENCY_TTL)")
	fs.StringVar(&limit, "per-user-limit", env("SHOP_PER_USER_LIMIT", "0"), "most units of one SKU a user may hold; 0 means no limit (SHOP_PER_USER_LIMIT)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	c.ZKAddrs, c.RedlockAddrs = List(zk), List(redlock)
	for _, a := range []struct{ name, addr string }{{"SHOP_HTTP_ADDR", c.HTTPAddr}, {"SHOP_DEBUG_ADDR", c.DebugAddr}, {"SHOP_REDIS_ADDR", c.RedisAddr}} {
		if a.addr == "" && a.name == "SHOP_DEBUG_ADDR" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			bad("%s: %q is not host:port", a.name, a.addr)
		}
	}
	for _, l := range []struct {
		name  string
		addrs []string
	}{{"SHOP_ZK_ADDRS", c.ZKAddrs}, {"SHOP_REDLOCK_ADDRS", c.RedlockAddrs}} {
		for i, a := range l.addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				bad("%s: %q is not host:port", l.name, a)
			} else if slices.Contains(l.addrs[:i], a) {
				bad("%s: %q is listed twice", l.name, a)
			}
		}
	}
	if !strings.HasPrefix(c.ZKRoot, "/") || c.ZKRoot == "/" || path.Clean(c.ZKRoot) != c.ZKRoot {
		bad("SHOP_ZK_ROOT: %q is not a clean absolute znode path below /", c.ZKRoot)
	}
	if c.MySQLDSN == "" {
		bad("SHOP_MYSQL_DSN is required, e.g. shop:shop@tcp(127.0.0.1:3306)/shop")
	} else if err := db.CheckDSN(c.MySQLDSN); err != nil {
		bad("SHOP_MYSQL_DSN: %v", err)
	}
	if !slices.Contains(strategies, c.Strategy) {
		bad("SHOP_STRATEGY: unknown strategy %q, want one of %s", c.Strategy, strings.Join(strategies, ", "))
	}
	var err error
	if c.LockTTL, err = duration(ttl, 100*time.Millisecond); err != nil {
		bad("SHOP_LOCK_TTL: %v", err)
	}
	if c.RequestTimeout, err = duration(timeout, 10*time.Millisecond); err != nil {
		bad("SHOP_REQUEST_TIMEOUT: %v", err)
	}
	if c.IdempotencyTTL, err = duration(idemTTL, time.Second); err != nil {
		bad("SHOP_IDEMPOTENCY_TTL: %v", err)
	}
	if c.PerUserLimit, err = strconv.Atoi(limit); err != nil || c.PerUserLimit < 0 {
		bad("SHOP_PER_USER_LIMIT: %q is not a whole number of units, 0 or more", limit)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// List splits a comma-separated list, dropping empty items.
func List(s string) []string {
	var items []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			items = append(items, a)
		}
	}
	return items
}

// MinRedlockMasters is the fewest masters Redlock can use: with fewer, a
// majority cannot survive the loss of one.
const MinRedlockMasters = 3

// Require checks that c configures the servers a strategy needs beyond
// MySQL: "redis", "redlock" or "zookeeper".
func (c Config) Require(strategy string, needs []string) error {
	var errs []error
	for _, need := range needs {
		switch need {
		case "redis":
			// SHOP_REDIS_ADDR always has a value.
		case "redlock":
			if len(c.RedlockAddrs) < MinRedlockMasters {
				errs = append(errs, fmt.Errorf("strategy %s needs SHOP_REDLOCK_ADDRS: at least %d independent Redis masters, got %d",
					strategy, MinRedlockMasters, len(c.RedlockAddrs)))
			}
		case "zookeeper":
			if len(c.ZKAddrs) == 0 {
				errs = append(errs, fmt.Errorf("strategy %s needs SHOP_ZK_ADDRS", strategy))
			}
		default:
			errs = append(errs, fmt.Errorf("strategy %s needs %q, which no setting provides", strategy, need))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

func duration(s string, min time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 10s or 500ms", s)
	}
	if d < min {
		return 0, fmt.Errorf("%s is below the minimum %s", d, min)
	}
	return d, nil
}

// LogValue masks the admin token and the database password.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("http_addr", c.HTTPAddr),
		slog.String("debug_addr", c.DebugAddr),
		slog.String("mysql_dsn", MaskDSN(c.MySQLDSN)),
		slog.String("redis_addr", c.RedisAddr),
		slog.String("redis_prefix", c.RedisPrefix),
		slog.String("zk_addrs", strings.Join(c.ZKAddrs, ",")),
		slog.String("zk_root", c.ZKRoot),
		slog.String("redlock_addrs", strings.Join(c.RedlockAddrs, ",")),
		slog.String("strategy", c.Strategy),
		slog.String("admin_token", mask(c.AdminToken)),
		slog.Duration("lock_ttl", c.LockTTL),
		slog.Duration("request_timeout", c.RequestTimeout),
		slog.Duration("idempotency_ttl", c.IdempotencyTTL),
		slog.Int("per_user_limit", c.PerUserLimit),
	)
}

// MaskDSN hides the password in a MySQL DSN. An SQLite DSN is a file name,
// shown as it is.
func MaskDSN(dsn string) string {
	if strings.HasPrefix(dsn, db.SQLitePrefix) {
		return dsn
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return mask(dsn)
	}
	cfg.Passwd = mask(cfg.Passwd)
	return cfg.FormatDSN()
}

func mask(secret string) string {
	if secret == "" {
		return ""
	}
	return "*****"
}
