// Package app wires the shop together: it opens the backends that the
// chosen strategy needs, has its registry entry build the placement that
// the order service places through, runs the background jobs, and returns
// the HTTP handler.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/buyer"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/logrepeat"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/outbox"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/tracing"
)

// App is a wired shop.
type App struct {
	Handler  http.Handler
	backends *backend.Backends
	orders   *order.Service     // nil until built
	keys     *idempotency.Store // nil until built
	stopJobs func()             // stops the background jobs and waits for them
}

// New opens the backends, migrates the schema (or with SHOP_MIGRATE=off
// checks it) and builds the handler.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*App, error) {
	s, err := strategy.Lookup(cfg.Strategy)
	if err != nil {
		return nil, err
	}
	if err := s.Require(cfg); err != nil {
		return nil, err
	}
	b, err := backend.Open(ctx, cfg, s.Needs, log)
	if err != nil {
		return nil, err
	}
	a := &App{backends: b, stopJobs: func() {}}
	if err := db.PrepareSchema(ctx, b.DB, cfg.Migrate); err != nil {
		return nil, errors.Join(err, a.Close())
	}
	placement, err := s.Build(b, cfg)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("strategy %s: %w", cfg.Strategy, err), a.Close())
	}
	buyers, err := cfg.Verifier()
	if err != nil {
		return nil, errors.Join(err, a.Close())
	}
	var rate *buyer.Limiter
	if cfg.BuyerRate.N > 0 {
		rate = buyer.NewLimiter(b.Redis, cfg.BuyerRate.N, cfg.BuyerRate.Period, cfg.RedisPrefix, log)
	}
	orders := order.NewService(b.DB, placement, &order.Options{
		Keys:         &order.KeyOptions{Redis: b.Redis, Prefix: cfg.RedisPrefix, TTL: cfg.IdempotencyTTL},
		SoldOutLease: cfg.Lease()})
	a.orders = orders
	a.startJobs(ctx, b, cfg, log, orders, placement)
	a.keys = idempotency.NewStore(b.Redis, &idempotency.Options{
		Prefix:     cfg.RedisPrefix,
		TTL:        cfg.IdempotencyTTL,
		PendingTTL: cfg.RequestTimeout + pendingMargin,
	})
	a.Handler = httpapi.New(httpapi.Config{
		Strategy:       cfg.Strategy,
		Orders:         orders,
		Idempotency:    a.keys,
		AdminToken:     cfg.AdminToken,
		AllowReset:     cfg.AllowReset,
		PaymentSecret:  []byte(cfg.PaymentSecret),
		Buyers:         buyers,
		Rate:           rate,
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

// Close stops the jobs, waits for the orders under way and the order
// service's background work, and for the key store's, and closes the
// backends.
func (a *App) Close() error {
	a.stopJobs()
	if a.orders != nil {
		a.orders.Close()
	}
	if a.keys != nil {
		a.keys.Close()
	}
	return a.backends.Close()
}

// The jobs that run on one instance at a time: lua's reconciliation, the
// expiry of pending orders, the relay of the order events and their
// retention.
const (
	reconcileName = "reconcile"
	expiryName    = "expiry"
	relayName     = "relay"
	retentionName = "events-retention"
)

// retentionEvery is how often one instance forgets the events published
// before SHOP_EVENTS_RETENTION.
const retentionEvery = time.Minute

// startJobs runs the jobs this shop has, each on whichever instance takes
// its lock first, until Close.
func (a *App) startJobs(ctx context.Context, b *backend.Backends, cfg config.Config, log *slog.Logger, orders *order.Service, placement order.Placement) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	events := outbox.New(b.DB, &outbox.Options{StreamMaxLen: cfg.StreamMaxLen, GapWait: cfg.RelayGapWait})
	var wg sync.WaitGroup
	failed := &logrepeat.Suppressor{Logger: log} // a job failing each interval logs once per logrepeat.Every
	every := func(name string, interval time.Duration, job lock.Job) {
		wg.Go(func() {
			traced(name, job).Every(ctx, jobLocker(b, cfg), name, interval, func(err error) {
				failed.Log(ctx, slog.LevelWarn, name, "job failed", slog.String("job", name), slog.Any("err", err))
			})
		})
	}
	if l := placement.Reconcile; l != nil {
		every(reconcileName, cfg.ReconcileEvery, reconcileJob(l, func(rep order.Reconciliation) {
			if rep.Fixed() {
				log.Info("reconciled", slog.Any("report", rep))
			}
		}))
	}
	if cfg.PaymentWindow > 0 {
		every(expiryName, cfg.ExpiryEvery, func(ctx context.Context, token int64) error {
			n, err := orders.Expire(ctx, token)
			metrics.Orders.WithLabelValues(cfg.Strategy, "expired").Add(float64(n))
			return err
		})
	}
	every(relayName, cfg.RelayEvery, func(ctx context.Context, _ int64) error {
		_, err := events.Relay(ctx, b.Redis, cfg.Events())
		return err
	})
	every(retentionName, retentionEvery, func(ctx context.Context, _ int64) error {
		_, err := events.Purge(ctx, b.Redis, cfg.Events(), time.Now().Add(-cfg.Retention))
		return err
	})
	a.stopJobs = func() { cancel(); wg.Wait() }
}

// traced makes each run of job the root span of a trace of its own, named
// after the job, with the run's fencing token.
func traced(name string, job lock.Job) lock.Job {
	return func(ctx context.Context, token int64) (err error) {
		ctx, span := tracing.Tracer().Start(ctx, "job "+name, trace.WithNewRoot(),
			trace.WithAttributes(attribute.String("shop.job", name), tracing.FencingToken(token)))
		defer func() { tracing.End(span, err) }()
		return job(ctx, token)
	}
}

// jobLocker is the lock of the jobs that run on one instance at a time:
// on the shop's Redis, with the locks' TTL and watchdog.
func jobLocker(b *backend.Backends, cfg config.Config) lock.Locker {
	return lock.NewRedis(b.Redis, &lock.RedisOptions{TTL: cfg.LockTTL, Prefix: cfg.RedisPrefix + "lock:"})
}

func reconcileJob(reconcile func(context.Context, int64) (order.Reconciliation, error), report func(order.Reconciliation)) lock.Job {
	return func(ctx context.Context, token int64) error {
		rep, err := reconcile(ctx, token)
		if err == nil {
			report(rep)
		}
		return err
	}
}

// Reconcile runs lua's reconciliation once, by hand, under the lock of the
// job that `shop serve` runs: it waits while an instance runs it, until ctx
// ends.
func Reconcile(ctx context.Context, cfg config.Config, log *slog.Logger) (order.Reconciliation, error) {
	s, err := strategy.Lookup("lua")
	if err != nil {
		return nil, err
	}
	if err := s.Require(cfg); err != nil {
		return nil, err
	}
	b, err := backend.Open(ctx, cfg, s.Needs, log)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if err := db.PrepareSchema(ctx, b.DB, cfg.Migrate); err != nil {
		return nil, err
	}
	placement, err := s.Build(b, cfg)
	if err != nil {
		return nil, err
	}
	defer placement.Close() // lua's writers
	l := placement.Reconcile
	if l == nil {
		return nil, fmt.Errorf("strategy lua: it declares no reconciliation")
	}
	var rep order.Reconciliation
	err = traced(reconcileName, reconcileJob(l, func(r order.Reconciliation) { rep = r })).Once(ctx, jobLocker(b, cfg), reconcileName, true)
	return rep, err
}
