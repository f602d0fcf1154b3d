// Package metrics holds every Prometheus metric of the shop, in one
// registry that `shop serve` exposes at /metrics on its debug listener.
// The packages that count import these variables; nothing else registers a
// metric. Labels are bounded: a strategy, a lock backend, a route, a
// status, an outcome; never a SKU or a user.
package metrics

import (
	"database/sql"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/stockguard/shop/internal/buildinfo"
)

// Registry holds the shop's metrics and the Go runtime's.
var Registry = prometheus.NewRegistry()

// Buckets of the latency histograms, in seconds: from 0.5ms, where a warm
// Redis round trip lies, to 10s, the default request deadline.
var latency = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

var (
	// LockAcquire is how long an acquisition waited, by lock backend.
	LockAcquire = histogram("shop_lock_acquire_seconds", "Time from asking for a lock to holding it.", latency, "backend")
	// LockHold is how long a lease was held, from its grant to its release.
	LockHold = histogram("shop_lock_hold_seconds", "Time a lock was held, from its grant to its release.", latency, "backend")
	// LeasesLost counts leases that ended before their release: expired,
	// their renewal failed, or their session ended.
	LeasesLost = counter("shop_lock_leases_lost_total", "Leases lost before their holder released them.", "backend")
	// TokenRaises counts leases whose tokens were raised past the fence,
	// after their lock's server lost its count (lock.Lease.Raise).
	TokenRaises = counter("shop_lock_token_raises_total", "Lock tokens raised past the fence after the lock's server lost its count.", "backend")
	// FenceRefusals counts writes the database refused because a holder
	// with a newer fencing token had claimed the SKU.
	FenceRefusals = register(prometheus.NewCounter(prometheus.CounterOpts{Name: "shop_fence_refusals_total",
		Help: "Stock writes refused by the fence: a newer lock holder had claimed the SKU."}))

	// HTTPRequests is the latency of the API's requests, by route pattern
	// ("unmatched" for none), method and status.
	HTTPRequests = histogram("shop_http_request_duration_seconds", "Latency of the API's requests.", latency, "route", "method", "status")
	// Orders counts the answers to order requests, by strategy and outcome:
	// created, replayed, sold-out, limit-reached, busy, unauthorized,
	// forbidden, rate-limited, request-timeout, key-reused, in-progress,
	// invalid or error; and with a payment window, the answers to payment
	// callbacks and cancellations (paid, order-expired, already-paid,
	// cancelled) and the orders the expiry job cancelled (expired).
	Orders = counter("shop_orders_total", "Answers to order requests, by outcome.", "strategy", "outcome")
	// UnitsPending is the units that pending orders hold, as the expiry
	// job last counted them: read it with max() across instances.
	UnitsPending = register(prometheus.NewGauge(prometheus.GaugeOpts{Name: "shop_units_pending",
		Help: "Units held by pending orders, as the expiry job last counted them."}))
	// Idempotency counts what the Idempotency-Key store answered, where it
	// did not let a request through as new: a stored response replayed, a
	// request whose first is still in progress, a key reused for another
	// request, or the store unavailable (the database's unique index then
	// guards alone).
	Idempotency = counter("shop_idempotency_total", "Idempotency-Key store answers other than a new request.", "result")

	// SoldOutLeases counts the sold-out leases this instance took, and
	// SoldOutLeaseAnswers the buyers it told sold out under one, without
	// asking the strategy (internal/order/soldout.go).
	SoldOutLeases = register(prometheus.NewCounter(prometheus.CounterOpts{Name: "shop_sold_out_leases_total",
		Help: "Sold-out leases this instance took on SKUs' rows."}))
	SoldOutLeaseAnswers = register(prometheus.NewCounter(prometheus.CounterOpts{Name: "shop_sold_out_lease_answers_total",
		Help: "Buyers told sold out under a sold-out lease, without asking the strategy."}))
	// LimitLeases counts the limit leases this instance took, and
	// LimitLeaseAnswers the buyers it told limit-reached under one,
	// without asking the strategy (internal/order/limitlease.go).
	LimitLeases = register(prometheus.NewCounter(prometheus.CounterOpts{Name: "shop_limit_leases_total",
		Help: "Limit leases this instance took on buyers' rows of user_purchases."}))
	LimitLeaseAnswers = register(prometheus.NewCounter(prometheus.CounterOpts{Name: "shop_limit_lease_answers_total",
		Help: "Buyers told limit-reached under a limit lease, without asking the strategy."}))

	// RateFailedOpen counts requests let through the per-buyer rate limit
	// unchecked because Redis did not answer it.
	RateFailedOpen = register(prometheus.NewCounter(prometheus.CounterOpts{Name: "shop_buyer_rate_failed_open_total",
		Help: "Requests let through the per-buyer rate limit unchecked because Redis did not answer."}))

	// JobRuns counts the turns of the jobs that run on one instance at a
	// time (lock.Job) that this process ran, by job and result: ok, failed,
	// or lost, when the lease ended before the run did.
	JobRuns = counter("shop_job_runs_total", "Turns of single-instance jobs this process ran, by result.", "job", "result")
	// JobRunning is 1 while this process runs a turn of the job.
	JobRunning = register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shop_job_running",
		Help: "1 while this process runs a turn of the single-instance job."}, []string{"job"}))

	// LuaPending is how many lua reservations were in the recovery logs and
	// not yet in the database, at the last reconcile this process ran.
	LuaPending = register(prometheus.NewGauge(prometheus.GaugeOpts{Name: "shop_lua_pending_reservations",
		Help: "lua reservations logged in Redis and not yet in the database, at this process's last reconcile."}))
	// OrderLines is the lines per order placed: 1 for a single SKU.
	OrderLines = register(prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shop_order_lines",
		Help: "Lines per order placed (1 for a single SKU).", Buckets: []float64{1, 2, 3, 5, 10, 20}}))
	// SagaCompensations counts the give-backs of lua carts' saga lines, by
	// result: returned, nothing-held (before its reservation, or gone),
	// duplicate, persisted (the cart was in the database: nothing went
	// back), failed.
	SagaCompensations = counter("shop_saga_compensations_total", "Give-backs of lua carts' lines, by result.", "result")
	// LuaClaimed counts the reservations this process's reconciles took
	// over from dead instances, by result: persisted, or released (refused
	// by the database, or already there).
	LuaClaimed = counter("shop_lua_claimed_total", "lua reservations claimed from dead instances, by result.", "result")
	// LuaRedisErrors counts the Redis calls of lua that failed where no
	// buyer waits for them, by operation: keep (a refusal's answer),
	// settle, cart-done, adjust and rebuild. What each would have written
	// is set right later, by a retry, a claim or the next reconcile.
	LuaRedisErrors = counter("shop_lua_redis_errors_total", "Redis calls of lua that failed where no buyer waits for them, by operation.", "op")
	// LuaCorrections counts the SKU states this process's reconciles
	// changed, by reason: missing, epoch (another epoch's) or drift.
	LuaCorrections = counter("shop_lua_reconcile_corrections_total", "SKU states in Redis that reconcile set anew, by reason.", "reason")

	// EventsPurged counts the published order events that the retention
	// job deleted from the database.
	EventsPurged = register(prometheus.NewCounter(prometheus.CounterOpts{Name: "shop_events_purged_total",
		Help: "Published order events deleted from the database past SHOP_EVENTS_RETENTION."}))
	// EventsStreamLength is the events stream's length after the retention
	// job's last trim: read it with max() across instances.
	EventsStreamLength = register(prometheus.NewGauge(prometheus.GaugeOpts{Name: "shop_events_stream_length",
		Help: "Entries in the order events stream, after the retention job's last trim."}))

	// BatchSize is how many buyers one group-commit transaction answered.
	BatchSize = histogram("shop_batch_size", "Buyers answered by one group-commit transaction.",
		prometheus.ExponentialBuckets(1, 2, 8), "strategy")
	// FirstReadBuyers is how many buyers one shared first read answered:
	// one statement for the stock of a SKU and all their keys.
	FirstReadBuyers = register(prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shop_first_read_buyers",
		Help: "Buyers answered by one shared read of a SKU's stock and their keys.", Buckets: prometheus.ExponentialBuckets(1, 2, 9)}))
	// BatchCommit is how long one batch took, from its first statement to
	// its commit, retries included.
	BatchCommit = histogram("shop_batch_commit_seconds", "Time one group-commit batch took, retries included.", latency, "strategy")
)

func register[C prometheus.Collector](c C) C {
	Registry.MustRegister(c)
	return c
}

func histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// buildInfo is 1, labelled with the build that runs.
var buildInfo = register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shop_build_info",
	Help: "Always 1: the shop's module version, VCS revision and Go version, as labels."}, []string{"version", "revision", "goversion"}))

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	b := buildinfo.Read()
	buildInfo.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
}

// WatchDB adds the statistics of the database pool db: connections open,
// in use and idle, waits for a free one, and connections closed.
func WatchDB(db *sql.DB) error {
	return Registry.Register(collectors.NewDBStatsCollector(db, "shop"))
}
