// Package app wires the shop together: it opens the backends that the
// chosen strategy needs, builds its guard, and returns the HTTP handler.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/strategy"
)

// App is a wired shop.
type App struct {
	Handler  http.Handler
	backends *strategy.Backends
}

// New opens the backends, migrates the schema and builds the handler.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*App, error) {
	s, err := strategy.Lookup(cfg.Strategy)
	if err != nil {
		return nil, err
	}
	if err := s.Require(cfg); err != nil {
		return nil, err
	}
	b, err := strategy.Open(ctx, cfg, s.Needs, log)
	if err != nil {
		return nil, err
	}
	a := &App{backends: b}
	if err := db.Migrate(ctx, b.DB); err != nil {
		return nil, errors.Join(err, a.Close())
	}
	guard, err := s.Guard(b, cfg)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("strategy %s: %w", cfg.Strategy, err), a.Close())
	}
	a.Handler = httpapi.New(httpapi.Config{
		Strategy: cfg.Strategy,
		Orders:   order.NewService(b.DB, guard, &order.Options{PerUserLimit: cfg.PerUserLimit}),
		Idempotency: idempotency.NewStore(b.Redis, &idempotency.Options{
			Prefix:     cfg.RedisPrefix,
			TTL:        cfg.IdempotencyTTL,
			PendingTTL: cfg.RequestTimeout + pendingMargin,
		}),
		AdminToken:     cfg.AdminToken,
		RequestTimeout: cfg.RequestTimeout,
		Ready:          b.Ready,
		Log:            log,
	})
	return a, nil
}

// pendingMargin keeps a pending idempotency key past the deadline of its
// request, so that a retry cannot start while the first one still runs.
const pendingMargin = 5 * time.Second

// WatchDB adds the database pool's statistics to the metrics. A process
// may do it for one App only.
func (a *App) WatchDB() error {
	sqlDB, err := a.backends.DB.DB()
	if err != nil {
		return err
	}
	return metrics.WatchDB(sqlDB)
}

// Close closes the backends.
func (a *App) Close() error { return a.backends.Close() }
