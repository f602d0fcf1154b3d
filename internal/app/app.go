// Package app wires the shop together: it opens the backends a Config names,
// builds the chosen stock strategy, and returns the HTTP handler.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// Backends are the open connections a strategy may use.
type Backends struct {
	DB    *gorm.DB
	Redis *redis.Client
	// Redlock holds independent Redis masters, open only for a strategy
	// that needs "redlock".
	Redlock []*redis.Client
	// ZooKeeper is open only for a strategy that needs "zookeeper".
	ZooKeeper *zk.Conn
}

// Strategy describes one selectable stock strategy.
type Strategy struct {
	Name  string
	Needs []string // servers beyond MySQL it needs, e.g. "redis", "zookeeper"
	New   func(Backends, config.Config) (order.Guard, error)
	// OnSQLite is how the strategy runs on SQLite, the demo's embedded
	// database, where that differs from MySQL: the demo shows it beside the
	// results, or, with NotOnSQLite set, as why it skips the strategy.
	OnSQLite    string
	NotOnSQLite bool
}

// Strategies lists every selectable strategy, in the order reports show them.
var Strategies = []Strategy{
	{Name: "none", New: func(b Backends, _ config.Config) (order.Guard, error) { return stock.NewNone(b.DB), nil }},
	{Name: "atomic", New: func(b Backends, _ config.Config) (order.Guard, error) { return stock.NewAtomic(b.DB), nil }},
	{Name: "pessimistic", New: func(b Backends, _ config.Config) (order.Guard, error) { return stock.NewPessimistic(b.DB), nil },
		OnSQLite: "FOR UPDATE takes SQLite's one write lock, as BEGIN IMMEDIATE does: SQLite has no row locks"},
	{Name: "optimistic", New: func(b Backends, _ config.Config) (order.Guard, error) { return stock.NewOptimistic(b.DB), nil }},
	{Name: "local", New: locked(func(Backends, config.Config) (stock.Locker, error) { return lock.NewLocal(), nil })},
	{Name: "redis", Needs: []string{"redis"}, New: locked(func(b Backends, cfg config.Config) (stock.Locker, error) {
		return lock.NewRedis(b.Redis, lockOptions(cfg)), nil
	})},
	{Name: "redlock", Needs: []string{"redlock"}, New: locked(func(b Backends, cfg config.Config) (stock.Locker, error) {
		masters := make([]lock.RedisClient, len(b.Redlock))
		for i, c := range b.Redlock {
			masters[i] = c
		}
		return lock.NewRedlock(masters, lockOptions(cfg))
	})},
	{Name: "zookeeper", Needs: []string{"zookeeper"}, New: locked(func(b Backends, cfg config.Config) (stock.Locker, error) {
		return lock.NewZooKeeper(b.ZooKeeper, &lock.ZooKeeperOptions{Root: cfg.ZKRoot})
	})},
	{Name: "dbtable", New: locked(func(b Backends, cfg config.Config) (stock.Locker, error) {
		sqlDB, err := b.DB.DB()
		return lock.NewDBTable(sqlDB, &lock.DBTableOptions{TTL: cfg.LockTTL}), err
	}), NotOnSQLite: true, OnSQLite: "its lock times rows by the database's clock in MySQL's words (UTC_TIMESTAMP(6) + INTERVAL)"},
}

// lockOptions places the Redis locks under the shop's key prefix.
func lockOptions(cfg config.Config) *lock.RedisOptions {
	return &lock.RedisOptions{TTL: cfg.LockTTL, Prefix: cfg.RedisPrefix + "lock:"}
}

// locked builds a lock strategy: the one composition of stock.Locked on the
// lock that newLocker returns.
func locked(newLocker func(Backends, config.Config) (stock.Locker, error)) func(Backends, config.Config) (order.Guard, error) {
	return func(b Backends, cfg config.Config) (order.Guard, error) {
		l, err := newLocker(b, cfg)
		if err != nil {
			return nil, err
		}
		return stock.NewLocked(b.DB, l), nil
	}
}

// Names returns the names of Strategies.
func Names() []string {
	names := make([]string, len(Strategies))
	for i, s := range Strategies {
		names[i] = s.Name
	}
	return names
}

// Lookup finds a strategy by name.
func Lookup(name string) (Strategy, error) {
	i := slices.IndexFunc(Strategies, func(s Strategy) bool { return s.Name == name })
	if i < 0 {
		return Strategy{}, fmt.Errorf("unknown strategy %q", name)
	}
	return Strategies[i], nil
}

// App is a wired shop.
type App struct {
	Handler  http.Handler
	backends Backends
}

// New opens the backends, migrates the schema and builds the handler.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*App, error) {
	strategy, err := Lookup(cfg.Strategy)
	if err != nil {
		return nil, err
	}
	if err := cfg.Require(strategy.Name, strategy.Needs); err != nil {
		return nil, err
	}
	gdb, err := db.Open(ctx, cfg.MySQLDSN)
	if err != nil {
		return nil, err
	}
	a := &App{backends: Backends{DB: gdb, Redis: redis.NewClient(&redis.Options{Addr: cfg.RedisAddr})}}
	if slices.Contains(strategy.Needs, "redlock") {
		for _, addr := range cfg.RedlockAddrs {
			// The context timeout lets Redlock's per-master timeout reach the socket.
			a.backends.Redlock = append(a.backends.Redlock, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
		}
	}
	if slices.Contains(strategy.Needs, "zookeeper") {
		// The session timeout is the lease: how long a lock outlives a holder that stops answering.
		conn, _, err := zk.Connect(cfg.ZKAddrs, cfg.LockTTL, zk.WithLogger(zkLogger{log}))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("zookeeper: %w", err), a.Close())
		}
		a.backends.ZooKeeper = conn
	}
	if err := db.Migrate(ctx, gdb); err != nil {
		return nil, errors.Join(err, a.Close())
	}
	guard, err := strategy.New(a.backends, cfg)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("strategy %s: %w", cfg.Strategy, err), a.Close())
	}
	a.Handler = httpapi.New(httpapi.Config{
		Orders: order.NewService(gdb, guard, &order.Options{PerUserLimit: cfg.PerUserLimit}),
		Idempotency: idempotency.NewStore(a.backends.Redis, &idempotency.Options{
			Prefix:     cfg.RedisPrefix,
			TTL:        cfg.IdempotencyTTL,
			PendingTTL: cfg.RequestTimeout + pendingMargin,
		}),
		AdminToken:     cfg.AdminToken,
		RequestTimeout: cfg.RequestTimeout,
		Ready:          a.ready,
		Log:            log,
	})
	return a, nil
}

// pendingMargin keeps a pending idempotency key past the deadline of its
// request, so that a retry cannot start while the first one still runs.
const pendingMargin = 5 * time.Second

// ready reports whether the database and Redis answer, and the Redlock
// masters and ZooKeeper if the strategy uses them.
func (a *App) ready(ctx context.Context) error {
	sqlDB, err := a.backends.DB.DB()
	if err != nil {
		return err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	if err := a.backends.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	answered := 0
	for _, c := range a.backends.Redlock {
		if c.Ping(ctx).Err() == nil {
			answered++
		}
	}
	if n := len(a.backends.Redlock); answered < n/2+1 && n > 0 {
		return fmt.Errorf("redlock: %d of %d masters answer, fewer than a majority", answered, n)
	}
	if zc := a.backends.ZooKeeper; zc != nil && zc.State() != zk.StateHasSession {
		return fmt.Errorf("zookeeper: %s", zc.State())
	}
	return nil
}

// Close closes the backends.
func (a *App) Close() error {
	errs := []error{a.backends.Redis.Close(), db.Close(a.backends.DB)}
	for _, c := range a.backends.Redlock {
		errs = append(errs, c.Close())
	}
	if a.backends.ZooKeeper != nil {
		a.backends.ZooKeeper.Close()
	}
	return errors.Join(errs...)
}

// zkLogger sends go-zookeeper's log lines to the shop's log.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Info(fmt.Sprintf(format, args...), slog.String("component", "zookeeper"))
}
