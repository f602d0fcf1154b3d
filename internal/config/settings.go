package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

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
	// token marks a setting that `shop token` takes as a flag.
	token bool
	// pay marks a setting that `shop pay` takes as a flag.
	pay bool
	// events marks a setting that `shop events` takes as a flag.
	events bool
	// listener marks a setting of the HTTP listener, which `shop echo`
	// takes as a flag too.
	listener bool
	set      func(c *Config, v string) error // parses v into c
	get      func(c Config) string           // formats it back
}

// strategyUsage is filled in with the names of the strategies.
const strategyUsage = "stock strategy: %s"

// settings is every setting, in the order `shop serve -h` lists them.
var settings = [...]setting{
	listener(str("SHOP_HTTP_ADDR", "http", ":8080", "public HTTP listen address", func(c *Config) *string { return &c.HTTPAddr })),
	str("SHOP_DEBUG_ADDR", "debug", "127.0.0.1:6060", "pprof and Prometheus metrics listen address, empty to disable", func(c *Config) *string { return &c.DebugAddr }),
	listener(dur("SHOP_HTTP_READ_TIMEOUT", "http-read-timeout", "5s", 100*time.Millisecond, "how long a client may take to send a request, headers and body; a slower one is answered 408 or cut off", func(c *Config) *time.Duration { return &c.ReadTimeout })),
	listener(dur("SHOP_HTTP_WRITE_TIMEOUT", "http-write-timeout", "15s", 100*time.Millisecond, "how long a request may take from the end of its headers until its answer is written; must outlast SHOP_REQUEST_TIMEOUT and SHOP_HTTP_READ_TIMEOUT", func(c *Config) *time.Duration { return &c.WriteTimeout })),
	listener(dur("SHOP_HTTP_IDLE_TIMEOUT", "http-idle-timeout", "2m", 100*time.Millisecond, "how long a kept-alive connection may wait for its next request", func(c *Config) *time.Duration { return &c.IdleTimeout })),
	server(str("SHOP_MYSQL_DSN", "mysql", "", "MySQL DSN, user:pass@tcp(host:port)/db, or sqlite:FILE for an embedded database", func(c *Config) *string { return &c.MySQLDSN })),
	events(server(str("SHOP_REDIS_ADDR", "redis", "127.0.0.1:6379", "Redis address; several, comma-separated, are the seed nodes of a Redis Cluster; with SHOP_REDIS_SENTINEL_MASTER, the Sentinels' addresses", func(c *Config) *string { return &c.RedisAddr }))),
	events(load(str("SHOP_REDIS_SENTINEL_MASTER", "redis-sentinel-master", "", "name of the Redis master that the Sentinels at SHOP_REDIS_ADDR watch; the shop follows it through a failover; empty: no Sentinel", func(c *Config) *string { return &c.RedisSentinel }))),
	events(str("SHOP_REDIS_PREFIX", "redis-prefix", "shop:", "prefix of every Redis key the shop writes", func(c *Config) *string { return &c.RedisPrefix })),
	server(list("SHOP_ZK_ADDRS", "zk", "ZooKeeper addresses, comma-separated", func(c *Config) *[]string { return &c.ZKAddrs })),
	load(str("SHOP_ZK_ROOT", "zk-root", "/stockguard/locks", "znode under which the zookeeper strategy keeps its locks", func(c *Config) *string { return &c.ZKRoot })),
	server(list("SHOP_REDLOCK_ADDRS", "redlock", "independent Redis masters for the redlock strategy, comma-separated, at least 3", func(c *Config) *[]string { return &c.RedlockAddrs })),
	server(list("SHOP_ETCD_ADDRS", "etcd", "etcd endpoints for the etcd strategy, host:port, comma-separated", func(c *Config) *[]string { return &c.EtcdAddrs })),
	load(str("SHOP_ETCD_PREFIX", "etcd-prefix", "stockguard/locks/", "key prefix under which the etcd strategy keeps its locks", func(c *Config) *string { return &c.EtcdPrefix })),
	str("SHOP_STRATEGY", "strategy", "atomic", strategyUsage, func(c *Config) *string { return &c.Strategy }),
	str("SHOP_ADMIN_TOKEN", "admin-token", "", "bearer token for the admin endpoints; empty refuses them", func(c *Config) *string { return &c.AdminToken }),
	{env: "SHOP_ALLOW_RESET", flag: "allow-reset", def: "false", usage: "true lets the admin delete a SKU with its orders and holdings (DELETE /api/v1/stock/{sku}), for demos and tests; never in production",
		set: func(c *Config, v string) (err error) {
			if c.AllowReset, err = strconv.ParseBool(v); err != nil {
				return fmt.Errorf("%q is neither true nor false", v)
			}
			return nil
		},
		get: func(c Config) string { return strconv.FormatBool(c.AllowReset) }},
	dur("SHOP_LOCK_TTL", "lock-ttl", "10s", 100*time.Millisecond, "lease TTL of the distributed locks", func(c *Config) *time.Duration { return &c.LockTTL }),
	dur("SHOP_REQUEST_TIMEOUT", "request-timeout", "10s", 10*time.Millisecond, "deadline of one API request", func(c *Config) *time.Duration { return &c.RequestTimeout }),
	load(setting{env: "SHOP_SOLD_OUT_LEASE", flag: "sold-out-lease", def: "500ms", usage: "how long an instance that found a SKU sold out answers its buyers sold out without asking, under a lease on the SKU's row that a refund, an expiry or a restock waits for, and, under SHOP_PER_USER_LIMIT, answers a buyer at the limit limit-reached, under a lease on the buyer's row that whatever lowers what the buyer holds waits for; 0 takes none; MySQL only; at most a quarter of SHOP_REQUEST_TIMEOUT is used",
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || (d != 0 && d < 10*time.Millisecond) {
				return fmt.Errorf("%q is not 0 or a duration of 10ms or more, such as 500ms", v)
			}
			c.SoldOutLease = d
			return nil
		},
		get: func(c Config) string { return c.SoldOutLease.String() }}),
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
	load(setting{env: "SHOP_SKU_BUCKETS", flag: "sku-buckets", def: "1", usage: "lua: split each SKU's Redis stock into this many buckets, each under a hash tag of its own, so that one hot SKU spreads over the masters of a Redis Cluster; 1 to 64",
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 64 {
				return fmt.Errorf("%q is not a number of buckets from 1 to 64", v)
			}
			c.SKUBuckets = n
			return nil
		},
		get: func(c Config) string { return strconv.Itoa(c.SKUBuckets) }}),
	dur("SHOP_CLAIM_IDLE", "claim-idle", "30s", 100*time.Millisecond, "lua: how long a reservation stays pending before another instance takes it over from its dead one and persists it; must outlast SHOP_REQUEST_TIMEOUT", func(c *Config) *time.Duration { return &c.ClaimIdle }),
	dur("SHOP_RECONCILE_INTERVAL", "reconcile-interval", "5s", 100*time.Millisecond, "lua: how often one instance claims dead instances' reservations and sets Redis's stock from the database", func(c *Config) *time.Duration { return &c.ReconcileEvery }),
	load(setting{env: "SHOP_PAYMENT_WINDOW", flag: "payment-window", def: "0", usage: "how long a buyer has to pay an order, which holds its stock meanwhile, such as 15m; 0: an order is final when placed",
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || (d != 0 && d < 100*time.Millisecond) {
				return fmt.Errorf("%q is not 0 or a duration of 100ms or more, such as 15m", v)
			}
			c.PaymentWindow = d
			return nil
		},
		get: func(c Config) string { return c.PaymentWindow.String() }}),
	pay(str("SHOP_PAYMENT_SECRET", "payment-secret", "", "secret of the payment callbacks' Shop-Signature (HMAC-SHA256), at least 32 bytes; empty refuses every callback", func(c *Config) *string { return &c.PaymentSecret })),
	dur("SHOP_EXPIRY_INTERVAL", "expiry-interval", "1s", 10*time.Millisecond, "how often one instance cancels the pending orders past their deadline", func(c *Config) *time.Duration { return &c.ExpiryEvery }),
	events(str("SHOP_EVENTS_STREAM", "events-stream", "", "the Redis stream the order events are published to; empty: SHOP_REDIS_PREFIX followed by events, shop:events by default", func(c *Config) *string { return &c.EventsStream })),
	dur("SHOP_EVENTS_RETENTION", "events-retention", "168h", time.Minute, "how long published order events are kept, in the stream and in the database; one instance deletes older ones", func(c *Config) *time.Duration { return &c.Retention }),
	{env: "SHOP_EVENTS_MAXLEN", flag: "events-maxlen", def: "1000000", usage: "the events stream's length cap, about (XADD MAXLEN ~); 0 means no cap",
		set: func(c *Config, v string) (err error) {
			if c.StreamMaxLen, err = strconv.ParseInt(v, 10, 64); err != nil || c.StreamMaxLen < 0 {
				return fmt.Errorf("%q is not a number of entries, 0 or more", v)
			}
			return nil
		},
		get: func(c Config) string { return strconv.FormatInt(c.StreamMaxLen, 10) }},
	{env: "SHOP_MIGRATE", flag: "migrate", def: "on", usage: "on: serve migrates the schema up at start; off: it refuses to start on a schema behind, for deployments that run shop migrate up as a step of their own",
		set: func(c *Config, v string) error {
			if v != "on" && v != "off" {
				return fmt.Errorf("%q is neither on nor off", v)
			}
			c.Migrate = v == "on"
			return nil
		},
		get: func(c Config) string { return map[bool]string{true: "on", false: "off"}[c.Migrate] }},
	dur("SHOP_RELAY_INTERVAL", "relay-interval", "200ms", 10*time.Millisecond, "how often one instance publishes the order events not published yet", func(c *Config) *time.Duration { return &c.RelayEvery }),
	dur("SHOP_RELAY_GAP_WAIT", "relay-gap-wait", "2m", time.Second, "how long the relay waits for a missing order event id, which an open transaction may still commit, before it passes it as rolled back; must outlast every order transaction: SHOP_REQUEST_TIMEOUT, and a minute", func(c *Config) *time.Duration { return &c.RelayGapWait }),
	{env: "SHOP_BUYER_AUTH", flag: "buyer-auth", def: AuthNone, usage: "who the buyer is: jwt (a bearer token's sub) or none (the request's user_id, anyone can act as anyone)",
		set: func(c *Config, v string) error {
			if v != AuthNone && v != AuthJWT {
				return fmt.Errorf("%q is neither %s nor %s", v, AuthJWT, AuthNone)
			}
			c.BuyerAuth = v
			return nil
		},
		get: func(c Config) string { return c.BuyerAuth }},
	token(str("SHOP_JWT_SECRET", "jwt-secret", "", "HS256 secret of buyer tokens, at least 32 bytes", func(c *Config) *string { return &c.JWTSecret })),
	str("SHOP_JWT_PUBLIC_KEY", "jwt-public-key", "", "PEM file of the RSA (RS256) or ECDSA P-256 (ES256) public key that verifies buyer tokens", func(c *Config) *string { return &c.JWTPublicKey }),
	token(str("SHOP_JWT_ISSUER", "jwt-issuer", "", "iss that buyer tokens must carry; empty accepts any", func(c *Config) *string { return &c.JWTIssuer })),
	token(str("SHOP_JWT_AUDIENCE", "jwt-audience", "", "aud that buyer tokens must carry; empty accepts any", func(c *Config) *string { return &c.JWTAudience })),
	{env: "SHOP_BUYER_RATE", flag: "buyer-rate", def: "0", usage: "requests per buyer to order and refund, such as 5/s, shared by every instance through Redis; 0 means no limit",
		set: func(c *Config, v string) (err error) {
			c.BuyerRate, err = ParseRate(v)
			return err
		},
		get: func(c Config) string { return c.BuyerRate.String() }},
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

func server(s setting) setting   { s.server, s.load = true, true; return s }
func load(s setting) setting     { s.load = true; return s }
func token(s setting) setting    { s.token = true; return s }
func pay(s setting) setting      { s.pay = true; return s }
func events(s setting) setting   { s.events = true; return s }
func listener(s setting) setting { s.listener = true; return s }
