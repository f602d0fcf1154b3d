package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/tracing"
)

// Backends are the open connections a strategy may use: the database and
// Redis always, the rest for the strategies that need them. Open is the one
// place that opens them, for serve, demo, bench and the tests.
type Backends struct {
	DB *gorm.DB
	// Redis is a Redis server's client, a Redis Cluster's when
	// SHOP_REDIS_ADDR lists several seed nodes, or a Sentinel master's
	// (RedisOptions).
	Redis redis.UniversalClient
	// Redlock holds independent Redis masters, open only for a strategy
	// that needs Redlock.
	Redlock []*redis.Client
	// ZooKeeper is open only for a strategy that needs ZooKeeper.
	ZooKeeper *lock.ZKConn
	// Etcd is open only for a strategy that needs etcd.
	Etcd *clientv3.Client

	closers []func() error
	checks  []func(context.Context) error
}

// Need is a server a strategy needs beyond the database.
type Need int

// The servers strategies need.
const (
	// Redis is the shop's own Redis, which Open always opens: a lock
	// strategy on it names it for its docs.
	Redis Need = iota
	// Redlock is SHOP_REDLOCK_ADDRS, independent Redis masters.
	Redlock
	// ZooKeeper is SHOP_ZK_ADDRS.
	ZooKeeper
	// Etcd is SHOP_ETCD_ADDRS.
	Etcd
)

// server is what Open and Missing know of one Need.
type server struct {
	name string
	// missing says how to configure the server when cfg does not.
	missing func(config.Config) string
	// open, if set, connects to it into b, with its close and readiness
	// check.
	open func(ctx context.Context, cfg config.Config, b *Backends, log *slog.Logger) error
}

func (n Need) String() string { return servers[n].name }

// Missing says what of needs cfg does not configure, naming the flags and
// variables that would, one phrase each; none when it has all.
func Missing(cfg config.Config, needs []Need) []string {
	var lack []string
	for _, n := range needs {
		if why := servers[n].missing(cfg); why != "" {
			lack = append(lack, why)
		}
	}
	return lack
}

// MinRedlockMasters is the fewest masters Redlock can use: with fewer, a
// majority cannot survive the loss of one.
const MinRedlockMasters = 3

// servers is indexed by Need.
var servers = [...]server{
	Redis: {name: "redis", missing: func(c config.Config) string {
		if c.RedisAddr == "" {
			return "a Redis server (--redis or SHOP_REDIS_ADDR)"
		}
		return ""
	}},
	Redlock: {name: "redlock",
		missing: func(c config.Config) string {
			if n := len(c.RedlockAddrs); n < MinRedlockMasters {
				return "SHOP_REDLOCK_ADDRS: at least " + strconv.Itoa(MinRedlockMasters) + " independent Redis masters, got " + strconv.Itoa(n)
			}
			return ""
		},
		open: func(_ context.Context, cfg config.Config, b *Backends, _ *slog.Logger) error {
			for _, addr := range cfg.RedlockAddrs {
				// The context timeout lets Redlock's per-master timeout reach the socket.
				c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
				b.Redlock = append(b.Redlock, c)
				b.closers = append(b.closers, c.Close)
			}
			b.checks = append(b.checks, b.redlockReady)
			return nil
		}},
	ZooKeeper: {name: "zookeeper",
		missing: func(c config.Config) string {
			if len(c.ZKAddrs) == 0 {
				return "a ZooKeeper server (--zk or SHOP_ZK_ADDRS)"
			}
			return ""
		},
		open: func(_ context.Context, cfg config.Config, b *Backends, log *slog.Logger) error {
			// The session timeout is the lease: how long a lock outlives a
			// holder that stops answering.
			conn, err := lock.NewZKConn(func(onEvent func(zk.Event)) (*zk.Conn, error) {
				conn, _, err := zk.Connect(cfg.ZKAddrs, cfg.LockTTL, zk.WithLogger(zkLogger{log}), zk.WithEventCallback(onEvent))
				return conn, err
			}, log)
			if err != nil {
				return fmt.Errorf("zookeeper: %w", err)
			}
			b.ZooKeeper = conn
			b.closers = append(b.closers, conn.Close)
			b.checks = append(b.checks, func(context.Context) error {
				if s := conn.State(); s != zk.StateHasSession {
					return fmt.Errorf("zookeeper: %s", s)
				}
				return nil
			})
			return nil
		}},
	Etcd: {name: "etcd",
		missing: func(c config.Config) string {
			if len(c.EtcdAddrs) == 0 {
				return "an etcd server (--etcd or SHOP_ETCD_ADDRS)"
			}
			return ""
		},
		open: func(_ context.Context, cfg config.Config, b *Backends, _ *slog.Logger) error {
			// Every member is an endpoint, and the client balances over them:
			// a request that finds its member gone goes to another. The
			// keepalive finds a member that went silent (gRPC's shortest
			// interval, above etcd's 5s minimum).
			c, err := clientv3.New(clientv3.Config{Endpoints: cfg.EtcdAddrs, DialTimeout: 5 * time.Second,
				DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 3 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				return fmt.Errorf("etcd: %w", err)
			}
			b.Etcd = c
			b.closers = append(b.closers, c.Close)
			b.checks = append(b.checks, func(ctx context.Context) error {
				// A linearizable read answers only while a quorum does.
				if _, err := c.Get(ctx, "health", clientv3.WithCountOnly()); err != nil {
					return fmt.Errorf("etcd: %w", err)
				}
				return nil
			})
			return nil
		}},
}

// Open opens the database and Redis that cfg names, and the servers of
// needs. It does not migrate the schema.
func Open(ctx context.Context, cfg config.Config, needs []Need, log *slog.Logger) (*Backends, error) {
	gdb, err := db.Open(ctx, cfg.MySQLDSN)
	if err != nil {
		return nil, err
	}
	b := &Backends{DB: gdb, Redis: NewRedis(RedisOptions(cfg))}
	b.closers = []func() error{func() error { return db.Close(gdb) }, b.Redis.Close}
	if err := b.trace(); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	b.checks = []func(context.Context) error{
		func(ctx context.Context) error {
			if err := db.Ready(ctx, gdb); err != nil {
				return fmt.Errorf("mysql: %w", err)
			}
			return nil
		},
		func(ctx context.Context) error { return redisReady(ctx, b.Redis) },
	}
	for _, n := range needs {
		open := servers[n].open
		if open == nil {
			continue
		}
		if err := open(ctx, cfg, b, log); err != nil {
			return nil, errors.Join(err, b.Close())
		}
	}
	return b, nil
}

// trace adds the spans of the SQL statements and Redis commands, when
// tracing is on: without it, they would cost every statement and command
// for nothing.
func (b *Backends) trace() error {
	if !tracing.Enabled() {
		return nil
	}
	if err := b.DB.Use(tracing.GORM{}); err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	// The command, not its arguments: they hold buyers' ids, and cost
	// every command a string.
	return redisotel.InstrumentTracing(b.Redis, redisotel.WithTracerProvider(tracing.ChildrenOnly(otel.GetTracerProvider())),
		redisotel.WithCallerEnabled(false), redisotel.WithDBStatement(false))
}

// Ready reports whether every backend answers: the Redlock masters when a
// majority does.
func (b *Backends) Ready(ctx context.Context) error {
	for _, check := range b.checks {
		if err := check(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backends) redlockReady(ctx context.Context) error {
	answered := 0
	for _, c := range b.Redlock {
		if c.Ping(ctx).Err() == nil {
			answered++
		}
	}
	if n := len(b.Redlock); answered < n/2+1 {
		return fmt.Errorf("redlock: %d of %d masters answer, fewer than a majority", answered, n)
	}
	return nil
}

// Close closes every backend.
func (b *Backends) Close() error {
	var errs []error
	for _, c := range b.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// zkLogger sends go-zookeeper's log lines to the shop's log.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Info(fmt.Sprintf(format, args...), slog.String("component", "zookeeper"))
}
