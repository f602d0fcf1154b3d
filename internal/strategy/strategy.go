// Package strategy is the registry of the shop's stock strategies: each
// one's name, the servers it needs, how its guard is built from the opened
// backends, how it runs on the demo's embedded backends, and the ceiling
// the bench compares it with.
//
// Adding a strategy is one file for its guard (in internal/stock, or a lock
// in internal/lock) and one entry in registry below. Serve, demo, bench and
// the tests all read this list.
package strategy

import (
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// Strategy is one selectable stock strategy.
type Strategy struct {
	Name string
	// Needs lists the servers it uses beyond the database, which every
	// strategy uses, and Redis, where the shop keeps its Idempotency-Keys.
	Needs []Need
	// New builds the guard on the opened backends.
	New func(*Backends, config.Config) (order.Guard, error)
	// Embedded is how it runs on the demo's embedded backends.
	Embedded Embedded
	// Ceilings name the raw loops of the bench that bound its throughput:
	// it is compared with the slowest of them.
	Ceilings []Ceiling
}

// Embedded says how a strategy runs on the embedded backends of `shop demo`
// (SQLite, miniredis), where that differs from the real servers.
type Embedded struct {
	Note string // how it runs there instead, shown beside its result
	Skip string // why it cannot run there at all; empty when it can
}

// Ceiling names a raw loop of the bench: one operation on one hot row or
// key, with no HTTP and no framework.
type Ceiling string

// The ceilings the bench measures.
const (
	SQLAtomic     Ceiling = "sql-atomic"     // conditional UPDATE, INSERT, COMMIT
	SQLForUpdate  Ceiling = "sql-for-update" // SELECT … FOR UPDATE, UPDATE, INSERT, COMMIT
	RedisLua      Ceiling = "redis-lua"      // a Lua check-and-decrement
	RedisLock     Ceiling = "redis-lock"     // SET NX PX, compare-and-delete
	ZooKeeperLock Ceiling = "zookeeper-lock" // create, list, delete a sequential znode
)

// registry is every strategy, in the order reports show them.
var registry = []Strategy{
	{Name: "none", New: func(b *Backends, _ config.Config) (order.Guard, error) { return stock.NewNone(b.DB), nil },
		Ceilings: []Ceiling{SQLAtomic}},
	{Name: "atomic", New: guard(stock.NewAtomic), Ceilings: []Ceiling{SQLAtomic}},
	{Name: "pessimistic", New: guard(stock.NewPessimistic), Ceilings: []Ceiling{SQLForUpdate},
		Embedded: Embedded{Note: "FOR UPDATE takes SQLite's one write lock, as BEGIN IMMEDIATE does: SQLite has no row locks"}},
	{Name: "optimistic", New: guard(stock.NewOptimistic), Ceilings: []Ceiling{SQLAtomic}},
	{Name: "local", New: locked(func(*Backends, config.Config) (stock.Locker, error) { return lock.NewLocal(), nil }),
		Ceilings: []Ceiling{SQLAtomic}},
	{Name: "redis", Needs: []Need{Redis}, New: locked(func(b *Backends, cfg config.Config) (stock.Locker, error) {
		return lock.NewRedis(b.Redis, redisLockOptions(cfg)), nil
	}), Ceilings: []Ceiling{SQLAtomic, RedisLock}},
	{Name: "redlock", Needs: []Need{Redlock}, New: locked(func(b *Backends, cfg config.Config) (stock.Locker, error) {
		masters := make([]lock.RedisClient, len(b.Redlock))
		for i, c := range b.Redlock {
			masters[i] = c
		}
		return lock.NewRedlock(masters, redisLockOptions(cfg))
	}), Ceilings: []Ceiling{SQLAtomic, RedisLock}},
	{Name: "zookeeper", Needs: []Need{ZooKeeper}, New: locked(func(b *Backends, cfg config.Config) (stock.Locker, error) {
		return lock.NewZooKeeper(b.ZooKeeper, &lock.ZooKeeperOptions{Root: cfg.ZKRoot})
	}), Ceilings: []Ceiling{SQLAtomic, ZooKeeperLock}},
	{Name: "dbtable", New: locked(func(b *Backends, cfg config.Config) (stock.Locker, error) {
		sqlDB, err := b.DB.DB()
		return lock.NewDBTable(sqlDB, &lock.DBTableOptions{TTL: cfg.LockTTL}), err
	}), Ceilings: []Ceiling{SQLAtomic},
		Embedded: Embedded{Skip: "its lock times rows by the database's clock in MySQL's words (UTC_TIMESTAMP(6) + INTERVAL)"}},
}

// guard builds a strategy that needs the database alone. Like every
// strategy but none, it stands behind stock.Queued, so that sold-out
// answers never wait in its queue.
func guard[G stock.Guard](newGuard func(*gorm.DB) G) func(*Backends, config.Config) (order.Guard, error) {
	return func(b *Backends, _ config.Config) (order.Guard, error) {
		return stock.NewQueued(b.DB, newGuard(b.DB)), nil
	}
}

// locked builds a lock strategy: the one composition of stock.Locked on the
// lock that newLocker returns, behind stock.Queued.
func locked(newLocker func(*Backends, config.Config) (stock.Locker, error)) func(*Backends, config.Config) (order.Guard, error) {
	return func(b *Backends, cfg config.Config) (order.Guard, error) {
		l, err := newLocker(b, cfg)
		if err != nil {
			return nil, err
		}
		return stock.NewQueued(b.DB, stock.NewLocked(b.DB, l)), nil
	}
}

// redisLockOptions places the Redis locks under the shop's key prefix.
func redisLockOptions(cfg config.Config) *lock.RedisOptions {
	return &lock.RedisOptions{TTL: cfg.LockTTL, Prefix: cfg.RedisPrefix + "lock:"}
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
	var lack []string
	for _, n := range s.Needs {
		if why := servers[n].missing(cfg); why != "" {
			lack = append(lack, why)
		}
	}
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
