// Package strategy is the registry of the shop's stock strategies: each
// one's name, the servers it needs, what it builds for the order service
// from the opened backends (a guard that the service's placement wraps, or
// a placement of its own), how it runs on the demo's embedded backends,
// and the ceiling the bench compares it with.
//
// Adding a strategy is one file for its guard (in internal/stock, or a lock
// in internal/lock) or its placer, and one entry in registry below. Serve,
// demo, bench and the tests all read this list. See "Adding a strategy" in
// docs/strategies.md.
package strategy

import (
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/groupcommit"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/lua"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// Strategy is one selectable stock strategy.
type Strategy struct {
	Name string
	// Needs lists the servers it uses beyond the database, which every
	// strategy uses, and Redis, where the shop keeps its Idempotency-Keys.
	Needs []backend.Need
	// New builds the guard of a strategy that takes no lock, which the
	// order service's own placement wraps.
	New func(*backend.Backends, config.Config) (stock.Guard, error)
	// Lock builds the lock of a lock strategy, whose guard is then the one
	// composition stock.Locked on it.
	Lock func(*backend.Backends, config.Config) (stock.Locker, error)
	// Own builds the placement of a strategy that places its own orders
	// (batched, lua) under the rules: its guard, the steps it makes in
	// place of the service, and the background work the app runs for it.
	Own func(*backend.Backends, config.Config, order.Rules) (order.Placement, error)
	// Embedded is how it runs on the demo's embedded backends.
	Embedded Embedded
	// Ceiling names the raw loop of the bench that bounds its throughput.
	Ceiling Ceiling
	// NoQueue leaves out stock.Queued, which every other guard of New
	// or Lock stands behind so that sold-out answers never wait in its
	// queue: none must not have it. A strategy of Own queues its buyers
	// itself, and never stands behind it.
	NoQueue bool
}

// Embedded says how a strategy runs on the embedded backends of `shop demo`
// (SQLite, miniredis), where that differs from the real servers.
type Embedded struct {
	Note string // how it runs there instead, shown beside its result
	Skip string // why it cannot run there at all; empty when it can
}

// Ceiling names a raw loop of the bench: the most one path can do on one
// hot row or key on this machine, with no HTTP and no framework, measured
// in the same run as the strategies.
type Ceiling string

// The ceilings the bench measures.
const (
	// HTTPEcho is the shop's own HTTP stack with no backends: the most any
	// strategy can answer over HTTP here.
	HTTPEcho Ceiling = "http-echo"
	// HTTPEchoBurst is the same stack under the strategies' burst.
	HTTPEchoBurst Ceiling = "http-echo-burst"
	SQLAtomic     Ceiling = "sql-atomic"     // conditional UPDATE, INSERT, COMMIT
	SQLForUpdate  Ceiling = "sql-for-update" // SELECT … FOR UPDATE, UPDATE, INSERT, COMMIT
	SQLBatched    Ceiling = "sql-batched"    // group commit: 100 orders in one transaction
	RedisLua      Ceiling = "redis-lua"      // a Lua check-and-decrement
)

// Serial is a lock strategy's ceiling: one worker looping acquire, fence
// claim, the order transaction and release, the fastest the lock can hand
// a SKU from buyer to buyer when each buyer acquires it. Runs (see
// stock.Locked) let one acquisition serve several buyers of an instance,
// so a lock strategy can pass it.
func Serial(name string) Ceiling { return Ceiling("serial-" + name) }

// registry is every strategy, in the order reports show them.
var registry = []Strategy{
	{Name: "none", New: onDB(stock.NewNone), Ceiling: SQLAtomic, NoQueue: true},
	{Name: "atomic", New: onDB(stock.NewAtomic), Ceiling: SQLAtomic},
	{Name: "pessimistic", New: onDB(stock.NewPessimistic), Ceiling: SQLForUpdate,
		Embedded: Embedded{Note: "FOR UPDATE takes SQLite's one write lock, as BEGIN IMMEDIATE does: SQLite has no row locks"}},
	{Name: "optimistic", New: onDB(stock.NewOptimistic), Ceiling: SQLAtomic},
	{Name: "batched", Own: func(b *backend.Backends, _ config.Config, rules order.Rules) (order.Placement, error) {
		return groupcommit.NewBatched(b.DB, rules).Placement(), nil
	}, Ceiling: SQLBatched},
	{Name: "lua", Needs: []backend.Need{backend.Redis}, Own: func(b *backend.Backends, cfg config.Config, rules order.Rules) (order.Placement, error) {
		return lua.New(b.DB, b.Redis, lua.OptionsOf(cfg, rules)).Placement(), nil
	}, Ceiling: RedisLua},
	{Name: "local", Lock: func(*backend.Backends, config.Config) (stock.Locker, error) { return lock.NewLocal(), nil },
		Ceiling: Serial("local")},
	{Name: "redis", Needs: []backend.Need{backend.Redis}, Lock: func(b *backend.Backends, cfg config.Config) (stock.Locker, error) {
		return lock.NewRedis(b.Redis, redisLockOptions(cfg)), nil
	}, Ceiling: Serial("redis")},
	{Name: "redlock", Needs: []backend.Need{backend.Redlock}, Lock: func(b *backend.Backends, cfg config.Config) (stock.Locker, error) {
		masters := make([]lock.RedisClient, len(b.Redlock))
		for i, c := range b.Redlock {
			masters[i] = c
		}
		return lock.NewRedlock(masters, redisLockOptions(cfg))
	}, Ceiling: Serial("redlock")},
	{Name: "zookeeper", Needs: []backend.Need{backend.ZooKeeper}, Lock: func(b *backend.Backends, cfg config.Config) (stock.Locker, error) {
		return lock.NewZooKeeperOn(b.ZooKeeper, &lock.ZooKeeperOptions{Root: cfg.ZKRoot})
	}, Ceiling: Serial("zookeeper")},
	{Name: "etcd", Needs: []backend.Need{backend.Etcd}, Lock: func(b *backend.Backends, cfg config.Config) (stock.Locker, error) {
		return lock.NewEtcd(b.Etcd, &lock.EtcdOptions{TTL: cfg.LockTTL, Prefix: cfg.EtcdPrefix})
	}, Ceiling: Serial("etcd")},
	{Name: "dbtable", Lock: func(b *backend.Backends, cfg config.Config) (stock.Locker, error) {
		sqlDB, err := b.DB.DB()
		return lock.NewDBTable(sqlDB, &lock.DBTableOptions{TTL: cfg.LockTTL}), err
	}, Ceiling: Serial("dbtable"),
		Embedded: Embedded{Skip: "its lock times rows by the database's clock in MySQL's words (UTC_TIMESTAMP(6) + INTERVAL)"}},
}

// onDB adapts a constructor of a guard on the database alone.
func onDB[G stock.Guard](newGuard func(*gorm.DB) G) func(*backend.Backends, config.Config) (stock.Guard, error) {
	return func(b *backend.Backends, _ config.Config) (stock.Guard, error) { return newGuard(b.DB), nil }
}

// redisLockOptions places the Redis locks under the shop's key prefix.
func redisLockOptions(cfg config.Config) *lock.RedisOptions {
	return &lock.RedisOptions{TTL: cfg.LockTTL, Prefix: cfg.RedisPrefix + "lock:"}
}

// Build builds what the order service places through under the strategy,
// on the opened backends, with the rules of cfg, its per-user limit and
// payment window, made here once: its own placement (Own), or its guard, behind
// stock.Queued unless NoQueue, for the service's placement to wrap.
func (s Strategy) Build(b *backend.Backends, cfg config.Config) (order.Placement, error) {
	rules := order.Rules{Limit: cfg.PerUserLimit, Window: cfg.PaymentWindow}
	if s.Own != nil {
		return s.Own(b, cfg, rules)
	}
	var q *stock.Queued
	if s.Lock != nil {
		l, err := s.Lock(b, cfg)
		if err != nil {
			return order.Placement{}, err
		}
		q = stock.QueueLocked(b.DB, stock.NewLocked(b.DB, l))
	} else {
		g, err := s.New(b, cfg)
		if err != nil || s.NoQueue {
			return order.Guarded(g, rules), err
		}
		q = stock.NewQueued(b.DB, g)
	}
	return order.Placement{Guard: q, FirstRead: q, Rules: rules}, nil
}

// Guard is the guard of what Build builds.
func (s Strategy) Guard(b *backend.Backends, cfg config.Config) (stock.Guard, error) {
	p, err := s.Build(b, cfg)
	return p.Guard, err
}

// Register adds s to the registry, after the others: a strategy of a
// program's own, or of a test. It refuses a name already taken, and must
// run before the registry is read, as from an init function.
func Register(s Strategy) error {
	if slices.ContainsFunc(registry, func(r Strategy) bool { return r.Name == s.Name }) {
		return fmt.Errorf("strategy %s: already registered", s.Name)
	}
	registry = append(registry, s)
	return nil
}

// All returns every strategy, in the order reports show them.
func All() []Strategy { return slices.Clone(registry) }

// Names returns the names of All, in order.
func Names() []string {
	names := make([]string, len(registry))
	for i, s := range registry {
		names[i] = s.Name
	}
	return names
}

// Lookup finds a strategy by name.
func Lookup(name string) (Strategy, error) {
	i := slices.IndexFunc(registry, func(s Strategy) bool { return s.Name == name })
	if i < 0 {
		return Strategy{}, fmt.Errorf("unknown strategy %q", name)
	}
	return registry[i], nil
}

// Missing says what s needs that cfg does not configure, as "needs …"
// naming the flags and variables that would, or returns "".
func (s Strategy) Missing(cfg config.Config) string {
	lack := backend.Missing(cfg, s.Needs)
	if len(lack) == 0 {
		return ""
	}
	return "needs " + strings.Join(lack, " and ")
}

// Require is Missing as the error that stops `shop serve`.
func (s Strategy) Require(cfg config.Config) error {
	if why := s.Missing(cfg); why != "" {
		return fmt.Errorf("config: strategy %s %s", s.Name, why)
	}
	return nil
}
