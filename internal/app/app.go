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

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// Backends are the open connections a strategy may use.
type Backends struct {
	DB    *gorm.DB
	Redis *redis.Client
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
	gdb, err := db.Open(ctx, cfg.MySQLDSN)
	if err != nil {
		return nil, err
	}
	a := &App{backends: Backends{DB: gdb, Redis: redis.NewClient(&redis.Options{Addr: cfg.RedisAddr})}}
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

// ready reports whether the database and Redis answer.
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
	return nil
}

// Close closes the backends.
func (a *App) Close() error {
	return errors.Join(a.backends.Redis.Close(), db.Close(a.backends.DB))
}
