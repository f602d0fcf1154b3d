// Package config reads the shop's one Config from SHOP_* environment
// variables and command-line flags (flags win), validates it, and masks its
// secrets when it is logged. `shop serve`, `shop demo` and `shop bench` all
// read it here, from one table of settings.
package config

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/shop/internal/buyer"
	"github.com/stockguard/shop/internal/db"
)

// Config is everything `shop serve` needs.
type Config struct {
	HTTPAddr       string        // SHOP_HTTP_ADDR
	DebugAddr      string        // SHOP_DEBUG_ADDR; empty disables the debug listener
	ReadTimeout    time.Duration // SHOP_HTTP_READ_TIMEOUT
	WriteTimeout   time.Duration // SHOP_HTTP_WRITE_TIMEOUT
	IdleTimeout    time.Duration // SHOP_HTTP_IDLE_TIMEOUT
	MySQLDSN       string        // SHOP_MYSQL_DSN
	RedisAddr      string        // SHOP_REDIS_ADDR; see RedisAddrs
	RedisSentinel  string        // SHOP_REDIS_SENTINEL_MASTER: the master's name, with SHOP_REDIS_ADDR its Sentinels
	RedisPrefix    string        // SHOP_REDIS_PREFIX, put before every key the shop writes
	ZKAddrs        []string      // SHOP_ZK_ADDRS, comma-separated
	ZKRoot         string        // SHOP_ZK_ROOT, the znode that holds the locks
	RedlockAddrs   []string      // SHOP_REDLOCK_ADDRS, comma-separated independent Redis masters
	EtcdAddrs      []string      // SHOP_ETCD_ADDRS, comma-separated etcd endpoints
	EtcdPrefix     string        // SHOP_ETCD_PREFIX, the key prefix of the etcd locks
	Strategy       string        // SHOP_STRATEGY
	AdminToken     string        // SHOP_ADMIN_TOKEN; empty refuses the admin endpoints
	AllowReset     bool          // SHOP_ALLOW_RESET: DELETE /api/v1/stock/{sku} deletes a SKU and its orders
	LockTTL        time.Duration // SHOP_LOCK_TTL
	RequestTimeout time.Duration // SHOP_REQUEST_TIMEOUT
	IdempotencyTTL time.Duration // SHOP_IDEMPOTENCY_TTL
	SoldOutLease   time.Duration // SHOP_SOLD_OUT_LEASE; 0 takes none; see Lease
	PerUserLimit   int           // SHOP_PER_USER_LIMIT; 0 means none
	SKUBuckets     int           // SHOP_SKU_BUCKETS: lua's Redis stock of each SKU, split
	ClaimIdle      time.Duration // SHOP_CLAIM_IDLE
	ReconcileEvery time.Duration // SHOP_RECONCILE_INTERVAL
	PaymentWindow  time.Duration // SHOP_PAYMENT_WINDOW; 0: orders are final when placed
	PaymentSecret  string        // SHOP_PAYMENT_SECRET, of the payment callbacks' signatures
	ExpiryEvery    time.Duration // SHOP_EXPIRY_INTERVAL
	EventsStream   string        // SHOP_EVENTS_STREAM, the Redis stream of the order events; see Events
	RelayEvery     time.Duration // SHOP_RELAY_INTERVAL
	RelayGapWait   time.Duration // SHOP_RELAY_GAP_WAIT: how long the relay waits for a missing event id
	Retention      time.Duration // SHOP_EVENTS_RETENTION: published events older than it are deleted
	StreamMaxLen   int64         // SHOP_EVENTS_MAXLEN: the events stream's cap, about; 0 means none
	Migrate        bool          // SHOP_MIGRATE: on, serve migrates the schema at start; off, it refuses a schema behind
	BuyerAuth      string        // SHOP_BUYER_AUTH: AuthNone or AuthJWT
	JWTSecret      string        // SHOP_JWT_SECRET, the HS256 secret
	JWTPublicKey   string        // SHOP_JWT_PUBLIC_KEY, a PEM file: RS256 or ES256
	JWTIssuer      string        // SHOP_JWT_ISSUER; when set, every token must carry it
	JWTAudience    string        // SHOP_JWT_AUDIENCE; when set, every token must carry it
	BuyerRate      Rate          // SHOP_BUYER_RATE; zero means no limit
}

// The values of SHOP_BUYER_AUTH.
const (
	// AuthNone takes the buyer from the request's user_id: anyone can act
	// as anyone. For the demo, load tests and trusted callers.
	AuthNone = "none"
	// AuthJWT takes the buyer from a bearer token's sub.
	AuthJWT = "jwt"
)

// Rate is N requests per Period; the zero Rate is no limit.
type Rate struct {
	N      int
	Period time.Duration
}

var ratePeriods = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// ParseRate reads "0" (no limit) or "N/s", "N/m", "N/h".
func ParseRate(v string) (Rate, error) {
	if v == "0" {
		return Rate{}, nil
	}
	count, unit, _ := strings.Cut(v, "/")
	n, err := strconv.Atoi(count)
	period, ok := ratePeriods[unit]
	if err != nil || n < 1 || !ok {
		return Rate{}, fmt.Errorf("%q is not a rate such as 5/s, 100/m or 1000/h, or 0 for none", v)
	}
	return Rate{N: n, Period: period}, nil
}

func (r Rate) String() string {
	for unit, period := range ratePeriods {
		if r.N > 0 && r.Period == period {
			return fmt.Sprintf("%d/%s", r.N, unit)
		}
	}
	return "0"
}

// Load builds a Config from defaults, then the environment, then args, and
// validates it. strategies lists the names the caller can build.
func Load(args []string, getenv Getenv, strategies []string, usage io.Writer) (Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(usage)
	read := Flags(fs, getenv, strategies, ForServe)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c, err := read()
	if err == nil {
		err = AsGiven(fs, c.Validate(strategies))
	}
	return c, err
}

// Use says which settings a command takes as flags.
type Use int

const (
	// ForServe: every setting, as serve and migrate take them.
	ForServe Use = iota
	// ForLoad: the server addresses and the ZooKeeper and etcd roots, as
	// demo and bench take them. The addresses default to their variables
	// alone: empty means the server is not configured.
	ForLoad
	// ForToken: the secret, issuer and audience, as `shop token` signs
	// with them.
	ForToken
	// ForEcho: the public listener's address and timeouts, as `shop echo`
	// serves with them.
	ForEcho
	// ForPay: the payment secret, as `shop pay` signs with it.
	ForPay
	// ForEvents: Redis and the events stream, as `shop events` follows it.
	ForEvents
	// ForDB: the database alone, as `shop migrate` and `shop audit` use it.
	ForDB
)

// Flags registers the settings that use takes as flags on fs, each
// defaulting to its SHOP_* variable, else to its built-in default. The
// settings that are not flags take their variable or default.
//
// The returned function reads the settings once fs is parsed, and reports
// every value that does not parse; Validate checks the rest.
func Flags(fs *flag.FlagSet, getenv Getenv, strategies []string, use Use) func() (Config, error) {
	raw := make([]string, len(settings))
	for i, s := range settings {
		raw[i] = s.def
		if use == ForLoad && s.server {
			raw[i] = ""
		}
		if v, ok := lookup(getenv, s.env); ok {
			raw[i] = v
		}
		if (use == ForLoad && !s.load) || (use == ForToken && !s.token) || (use == ForEcho && !s.listener) || (use == ForPay && !s.pay) ||
			(use == ForEvents && !s.events) || (use == ForDB && s.env != "SHOP_MYSQL_DSN") {
			continue
		}
		usage := s.usage
		if usage == strategyUsage {
			usage = fmt.Sprintf(usage, strings.Join(strategies, ", "))
		}
		fs.StringVar(&raw[i], s.flag, raw[i], usage+" ("+s.env+")")
		// -h shows the default, which may come from the environment:
		// a secret is shown masked.
		fs.Lookup(s.flag).DefValue = Masked(s.env, raw[i])
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
			return Config{}, AsGiven(fs, fmt.Errorf("config: %w", err))
		}
		return c, nil
	}
}

// Events is the Redis stream of the order events: SHOP_EVENTS_STREAM, or
// by default the shop's key prefix followed by "events", so that a shop
// under a prefix of its own keeps its events there too.
func (c Config) Events() string { return cmp.Or(c.EventsStream, c.RedisPrefix+"events") }

// RedisAddrs splits SHOP_REDIS_ADDR: one address is a Redis server,
// several are the seed nodes of a Redis Cluster, from which the client
// learns the rest; with SHOP_REDIS_SENTINEL_MASTER, one or several are
// the Sentinels that name that master.
func (c Config) RedisAddrs() []string {
	var addrs []string
	for a := range strings.SplitSeq(c.RedisAddr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
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
		if a.addr == "" && a.name == "SHOP_REDIS_ADDR" && c.BuyerRate.N > 0 {
			bad("SHOP_BUYER_RATE needs Redis, where every instance counts each buyer's requests: set SHOP_REDIS_ADDR")
			continue
		}
		if a.addr == "" && a.name == "SHOP_REDIS_ADDR" && c.RedisSentinel != "" {
			bad("SHOP_REDIS_SENTINEL_MASTER needs the addresses of its Sentinels in SHOP_REDIS_ADDR, host:port, comma-separated")
			continue
		}
		addrs := []string{a.addr}
		if a.name == "SHOP_REDIS_ADDR" && a.addr != "" {
			addrs = c.RedisAddrs()
		}
		for i, addr := range addrs {
			if !hostPort(addr) {
				bad("%s: %q is not host:port, with a port from 0 to 65535", a.name, addr)
			} else if slices.Contains(addrs[:i], addr) {
				bad("%s: %q is listed twice", a.name, addr)
			}
		}
	}
	for _, l := range []struct {
		name  string
		addrs []string
	}{{"SHOP_ZK_ADDRS", c.ZKAddrs}, {"SHOP_REDLOCK_ADDRS", c.RedlockAddrs}, {"SHOP_ETCD_ADDRS", c.EtcdAddrs}} {
		for i, a := range l.addrs {
			if !hostPort(a) {
				bad("%s: %q is not host:port, with a port from 0 to 65535", l.name, a)
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
	if _, err := c.Verifier(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.writeTimeout())
	if n := len(c.PaymentSecret); n > 0 && n < 32 {
		bad("SHOP_PAYMENT_SECRET: %d bytes, want at least 32", n)
	}
	if c.Strategy == "lua" && c.ClaimIdle <= c.RequestTimeout {
		// A reservation is taken over once it has been pending that long,
		// and its own request may persist it until its deadline.
		bad("SHOP_CLAIM_IDLE: %s must be longer than SHOP_REQUEST_TIMEOUT (%s), or a reservation its request is still persisting is taken over", c.ClaimIdle, c.RequestTimeout)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// hostPort says whether addr is host:port with a port number that a
// listener or a client can use.
func hostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n <= 65535
}

// writeTimeout checks that SHOP_HTTP_WRITE_TIMEOUT leaves a request the
// time it may take. It runs from the end of the request's headers: it must
// cover reading the body, which SHOP_HTTP_READ_TIMEOUT allows, and the
// request's work, which SHOP_REQUEST_TIMEOUT allows, and still leave time
// to write the answer; else a slow but allowed request has its answer cut
// off, and its client never learns what was done.
func (c Config) writeTimeout() error {
	var errs []error
	for _, o := range []struct {
		name string
		d    time.Duration
	}{{"SHOP_REQUEST_TIMEOUT", c.RequestTimeout}, {"SHOP_HTTP_READ_TIMEOUT", c.ReadTimeout}} {
		if c.WriteTimeout <= o.d {
			errs = append(errs, fmt.Errorf("SHOP_HTTP_WRITE_TIMEOUT: %s must be longer than %s (%s), or answers that take that long are cut off; a few seconds more leaves time to write them", c.WriteTimeout, o.name, o.d))
		}
	}
	return errors.Join(errs...)
}

// Verifier builds the verifier of buyer tokens that c describes: nil with
// SHOP_BUYER_AUTH=none, else from SHOP_JWT_SECRET or SHOP_JWT_PUBLIC_KEY.
func (c Config) Verifier() (*buyer.Verifier, error) {
	if c.BuyerAuth != AuthJWT {
		return nil, nil
	}
	k := buyer.Keys{Secret: []byte(c.JWTSecret), Issuer: c.JWTIssuer, Audience: c.JWTAudience}
	switch {
	case c.JWTSecret == "" && c.JWTPublicKey == "":
		return nil, errors.New("SHOP_BUYER_AUTH=jwt needs SHOP_JWT_SECRET (HS256) or SHOP_JWT_PUBLIC_KEY (RS256 or ES256)")
	case c.JWTSecret != "" && c.JWTPublicKey != "":
		return nil, errors.New("SHOP_JWT_SECRET and SHOP_JWT_PUBLIC_KEY are both set: buyer tokens are verified with one of them")
	case c.JWTPublicKey != "":
		key, err := buyer.ReadPublicKey(c.JWTPublicKey)
		if err != nil {
			return nil, fmt.Errorf("SHOP_JWT_PUBLIC_KEY: %w", err)
		}
		k.PublicKey = key
	}
	v, err := buyer.NewVerifier(k)
	if err != nil {
		name := "SHOP_JWT_SECRET"
		if c.JWTPublicKey != "" {
			name = "SHOP_JWT_PUBLIC_KEY"
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
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

// Lease is the length of the sold-out and limit leases the shop takes: at
// most SHOP_SOLD_OUT_LEASE, and at most a quarter of SHOP_REQUEST_TIMEOUT,
// since a refund waits for the leases to end within its request, for each
// kind in turn.
func (c Config) Lease() time.Duration { return min(c.SoldOutLease, c.RequestTimeout/4) }
