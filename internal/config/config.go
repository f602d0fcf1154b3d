// Package config reads the shop's one Config from SHOP_* environment
// variables and command-line flags (flags win), validates it, and masks its
// secrets when it is logged. `shop serve`, `shop demo` and `shop bench` all
// read it here, from one table of settings.
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
	EtcdAddrs      []string      // SHOP_ETCD_ADDRS, comma-separated etcd endpoints
	EtcdPrefix     string        // SHOP_ETCD_PREFIX, the key prefix of the etcd locks
	Strategy       string        // SHOP_STRATEGY
	AdminToken     string        // SHOP_ADMIN_TOKEN; empty refuses the admin endpoints
	LockTTL        time.Duration // SHOP_LOCK_TTL
	RequestTimeout time.Duration // SHOP_REQUEST_TIMEOUT
	IdempotencyTTL time.Duration // SHOP_IDEMPOTENCY_TTL
	PerUserLimit   int           // SHOP_PER_USER_LIMIT; 0 means none
	ClaimIdle      time.Duration // SHOP_CLAIM_IDLE
	ReconcileEvery time.Duration // SHOP_RECONCILE_INTERVAL
}

// Getenv looks up one environment variable, as os.Getenv does.
type Getenv func(string) string

// setting is one SHOP_* variable and the flag that overrides it.
type setting struct {
	env, flag, def, usage string
	// server marks the address of a server: demo and bench take it as a
	// flag too, and there it has no built-in default, because empty means
	// that the server is to be embedded or done without.
	server bool
	// load marks another setting that demo and bench take as a flag.
	load bool
	set  func(c *Config, v string) error // parses v into c
	get  func(c Config) string           // formats it back
}

// strategyUsage is filled in with the names of the strategies.
const strategyUsage = "stock strategy: %s"

// settings is every setting, in the order `shop serve -h` lists them.
var settings = [...]setting{
	str("SHOP_HTTP_ADDR", "http", ":8080", "public HTTP listen address", func(c *Config) *string { return &c.HTTPAddr }),
	str("SHOP_DEBUG_ADDR", "debug", "127.0.0.1:6060", "pprof and Prometheus metrics listen address, empty to disable", func(c *Config) *string { return &c.DebugAddr }),
	server(str("SHOP_MYSQL_DSN", "mysql", "", "MySQL DSN, user:pass@tcp(host:port)/db, or sqlite:FILE for an embedded database", func(c *Config) *string { return &c.MySQLDSN })),
	server(str("SHOP_REDIS_ADDR", "redis", "127.0.0.1:6379", "Redis address", func(c *Config) *string { return &c.RedisAddr })),
	str("SHOP_REDIS_PREFIX", "redis-prefix", "shop:", "prefix of every Redis key the shop writes", func(c *Config) *string { return &c.RedisPrefix }),
	server(list("SHOP_ZK_ADDRS", "zk", "ZooKeeper addresses, comma-separated", func(c *Config) *[]string { return &c.ZKAddrs })),
	load(str("SHOP_ZK_ROOT", "zk-root", "/stockguard/locks", "znode under which the zookeeper strategy keeps its locks", func(c *Config) *string { return &c.ZKRoot })),
	server(list("SHOP_REDLOCK_ADDRS", "redlock", "independent Redis masters for the redlock strategy, comma-separated, at least 3", func(c *Config) *[]string { return &c.RedlockAddrs })),
	server(list("SHOP_ETCD_ADDRS", "etcd", "etcd endpoints for the etcd strategy, host:port, comma-separated", func(c *Config) *[]string { return &c.EtcdAddrs })),
	load(str("SHOP_ETCD_PREFIX", "etcd-prefix", "stockguard/locks/", "key prefix under which the etcd strategy keeps its locks", func(c *Config) *string { return &c.EtcdPrefix })),
	str("SHOP_STRATEGY", "strategy", "atomic", strategyUsage, func(c *Config) *string { return &c.Strategy }),
	str("SHOP_ADMIN_TOKEN", "admin-token", "", "bearer token for the admin endpoints; empty refuses them", func(c *Config) *string { return &c.AdminToken }),
	dur("SHOP_LOCK_TTL", "lock-ttl", "10s", 100*time.Millisecond, "lease TTL of the distributed locks", func(c *Config) *time.Duration { return &c.LockTTL }),
	dur("SHOP_REQUEST_TIMEOUT", "request-timeout", "10s", 10*time.Millisecond, "deadline of one API request", func(c *Config) *time.Duration { return &c.RequestTimeout }),
	dur("SHOP_IDEMPOTENCY_TTL", "idempotency-ttl", "24h", time.Second, "how long a response is kept for replay under its Idempotency-Key", func(c *Config) *time.Duration { return &c.IdempotencyTTL }),
	{env: "SHOP_PER_USER_LIMIT", flag: "per-user-limit", def: "0", usage: "most units of one SKU a user may hold; 0 means no limit",
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("%q is not a whole number of units, 0 or more", v)
			}
			c.PerUserLimit = n
			return nil
		},
		get: func(c Config) string { return strconv.Itoa(c.PerUserLimit) }},
	dur("SHOP_CLAIM_IDLE", "claim-idle", "30s", 100*time.Millisecond, "lua: how long a reservation stays pending before another instance takes it over from its dead one and persists it; must outlast SHOP_REQUEST_TIMEOUT", func(c *Config) *time.Duration { return &c.ClaimIdle }),
	dur("SHOP_RECONCILE_INTERVAL", "reconcile-interval", "5s", 100*time.Millisecond, "lua: how often one instance claims dead instances' reservations and sets Redis's stock from the database", func(c *Config) *time.Duration { return &c.ReconcileEvery }),
}

func str(env, flag, def, usage string, field func(*Config) *string) setting {
	return setting{env: env, flag: flag, def: def, usage: usage,
		set: func(c *Config, v string) error { *field(c) = v; return nil },
		get: func(c Config) string { return *field(&c) }}
}

func list(env, flag, usage string, field func(*Config) *[]string) setting {
	return setting{env: env, flag: flag, usage: usage,
		set: func(c *Config, v string) error { *field(c) = List(v); return nil },
		get: func(c Config) string { return strings.Join(*field(&c), ",") }}
}

func dur(env, flag, def string, min time.Duration, usage string, field func(*Config) *time.Duration) setting {
	return setting{env: env, flag: flag, def: def, usage: usage,
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%q is not a duration such as 10s or 500ms", v)
			}
			if d < min {
				return fmt.Errorf("%s is below the minimum %s", d, min)
			}
			*field(c) = d
			return nil
		},
		get: func(c Config) string { return field(&c).String() }}
}

func server(s setting) setting { s.server, s.load = true, true; return s }
func load(s setting) setting   { s.load = true; return s }

// Load builds a Config from defaults, then the environment, then args, and
// validates it. strategies lists the names the caller can build.
func Load(args []string, getenv Getenv, strategies []string, usage io.Writer) (Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(usage)
	read := Flags(fs, getenv, strategies, false)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c, err := read()
	if err == nil {
		err = c.Validate(strategies)
	}
	return c, err
}

// Flags registers the settings as flags on fs, each defaulting to its SHOP_*
// variable, else to its built-in default. With serversOnly, as for demo and
// bench, only the server addresses and the ZooKeeper root become flags, and
// the addresses default to their variables alone: empty means the server is
// not configured. The settings that are not flags take their variable or
// default.
//
// The returned function reads the settings once fs is parsed, and reports
// every value that does not parse; Validate checks the rest.
func Flags(fs *flag.FlagSet, getenv Getenv, strategies []string, serversOnly bool) func() (Config, error) {
	raw := make([]string, len(settings))
	for i, s := range settings {
		raw[i] = s.def
		if serversOnly && s.server {
			raw[i] = ""
		}
		if v := getenv(s.env); v != "" {
			raw[i] = v
		}
		if serversOnly && !s.load {
			continue
		}
		usage := s.usage
		if usage == strategyUsage {
			usage = fmt.Sprintf(usage, strings.Join(strategies, ", "))
		}
		fs.StringVar(&raw[i], s.flag, raw[i], usage+" ("+s.env+")")
	}
	return func() (Config, error) {
		var c Config
		var errs []error
		for i, s := range settings {
			if err := s.set(&c, raw[i]); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.env, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		return c, nil
	}
}

// Validate reports every setting of c that is missing or wrong. strategies
// lists the names the caller can build.
func (c Config) Validate(strategies []string) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
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
	}{{"SHOP_ZK_ADDRS", c.ZKAddrs}, {"SHOP_REDLOCK_ADDRS", c.RedlockAddrs}, {"SHOP_ETCD_ADDRS", c.EtcdAddrs}} {
		for i, a := range l.addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				bad("%s: %q is not host:port", l.name, a)
			} else if slices.Contains(l.addrs[:i], a) {
				bad("%s: %q is listed twice", l.name, a)
			}
		}
	}
	if c.EtcdPrefix == "" {
		bad("SHOP_ETCD_PREFIX: must not be empty")
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
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// Environ returns c as SHOP_* variables, for a child `shop serve`.
func (c Config) Environ() []string {
	env := make([]string, len(settings))
	for i, s := range settings {
		env[i] = s.env + "=" + s.get(c)
	}
	return env
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

// LogValue masks the admin token and the database password.
func (c Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, len(settings))
	for i, s := range settings {
		v := s.get(c)
		switch s.env {
		case "SHOP_MYSQL_DSN":
			v = MaskDSN(v)
		case "SHOP_ADMIN_TOKEN":
			v = mask(v)
		}
		attrs[i] = slog.String(strings.ToLower(strings.TrimPrefix(s.env, "SHOP_")), v)
	}
	return slog.GroupValue(attrs...)
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
