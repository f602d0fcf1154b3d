package sale

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// probe is one raw operation on a backend, with no HTTP and no framework.
// Looped, it shows the most the backend can do on one hot row or key on
// this machine, the ceiling of every strategy that runs through it.
type probe struct {
	Key  strategy.Ceiling
	Name string // what one operation is
	// Workers loop at once. Lock probes have 1: only one holder proceeds at
	// a time, so the loop is the fastest hand-over of one lock.
	Workers int
	// Orders is how many orders one operation makes, when more than one:
	// the figures are then per order.
	Orders int
	Do     func(ctx context.Context) error
}

// probeWorkers is how many workers loop a probe that allows concurrency:
// enough to queue on the hot row or key, as a burst does.
const probeWorkers = 32

// batchSize is how many orders one sql-batched transaction makes.
const batchSize = 100

// measure loops p for d.
func (p probe) measure(ctx context.Context, d time.Duration) loadtest.BaselineResult {
	st := loadtest.Loop(ctx, p.Workers, d, p.Do)
	if p.Orders > 1 {
		st.Ordered *= p.Orders
		st.Throughput *= float64(p.Orders)
	}
	return loadtest.BaselineResult{Key: string(p.Key), Name: p.Name, Workers: p.Workers, Stats: st}
}

// ceilings returns the probes of the database, of Redis, and the serial
// ceiling of each lock strategy in locks, on the servers cfg names. close
// removes what they created.
func ceilings(ctx context.Context, gdb *gorm.DB, cfg config.Config, locks []strategy.Strategy) (probes []probe, close func() error, err error) {
	var closers []func() error
	close = func() error {
		var errs []error
		for _, c := range slices.Backward(closers) {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, close())
		}
	}()
	tag := strings.ToLower(rand.Text()[:8])
	// newSKU puts a SKU on sale with stock no loop can exhaust.
	newSKU := func(name string) (string, error) {
		sku := "ceiling-" + name + "-" + tag
		if err := stock.Reset(ctx, gdb, sku, math.MaxInt32); err != nil {
			return "", fmt.Errorf("sale: ceiling %s: %w", name, err)
		}
		closers = append(closers, func() error { return forget(context.Background(), gdb, sku) })
		return sku, nil
	}

	sku, err := newSKU("sql")
	if err != nil {
		return nil, nil, err
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, nil, err
	}
	probes = append(probes, sqlProbes(sqlDB, sku)...)

	o := backend.RedisOptions(cfg)
	o.PoolSize = probeWorkers
	rdb := backend.NewRedis(o)
	key := cfg.RedisPrefix + "ceiling:" + tag + ":stock"
	closers = append(closers, func() error { return errors.Join(rdb.Del(context.Background(), key).Err(), rdb.Close()) })
	if err := rdb.Set(ctx, key, math.MaxInt64/2, 0).Err(); err != nil {
		return nil, nil, fmt.Errorf("sale: ceiling redis-lua: %w", err)
	}
	probes = append(probes, probe{Key: strategy.RedisLua, Name: "Redis: Lua check-and-DECRBY of one key", Workers: probeWorkers,
		Do: func(ctx context.Context) error { return decrement.Run(ctx, rdb, []string{key}, 1).Err() }})

	for _, s := range locks {
		b, err := backend.Open(ctx, cfg, s.Needs, slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, nil, fmt.Errorf("sale: ceiling of %s: %w", s.Name, err)
		}
		closers = append(closers, b.Close)
		l, err := s.Lock(b, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("sale: ceiling of %s: %w", s.Name, err)
		}
		sku, err := newSKU(s.Name)
		if err != nil {
			return nil, nil, err
		}
		guard := stock.NewLocked(b.DB, l)
		probes = append(probes, probe{Key: s.Ceiling, Workers: 1,
			Name: s.Name + ": acquire the lock, claim the fence, the order transaction, release",
			Do: func(ctx context.Context) error {
				return guard.Adjust(ctx, sku, -1, func(tx stock.Tx) error {
					return tx.Rows().Exec(`INSERT INTO orders (sku, user_id, quantity, status, created_at) VALUES (?, 'ceiling', 1, 'created', ?)`,
						sku, time.Now().UTC()).Error
				})
			}})
	}
	return probes, close, nil
}

// sqlProbes run the statements of the atomic and pessimistic strategies on
// one hot row, each with its order insert, one transaction per order.
func sqlProbes(sqlDB *sql.DB, sku string) []probe {
	insert := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO orders (sku, user_id, quantity, status, created_at) VALUES (?, 'ceiling', 1, 'created', ?)`,
			sku, time.Now().UTC())
		return err
	}
	return []probe{
		{Key: strategy.SQLAtomic, Name: "MySQL: conditional UPDATE … available >= 1, INSERT order, COMMIT", Workers: probeWorkers,
			Do: func(ctx context.Context) error {
				return inTx(ctx, sqlDB, func(tx *sql.Tx) error {
					res, err := tx.ExecContext(ctx, `UPDATE stock_items SET available = available - 1, version = version + 1, updated_at = ?
						WHERE sku = ? AND available >= 1`, time.Now().UTC(), sku)
					if err != nil {
						return err
					}
					if n, err := res.RowsAffected(); err != nil || n != 1 {
						return errors.Join(err, errors.New("sold out"))
					}
					return insert(ctx, tx)
				})
			}},
		{Key: strategy.SQLForUpdate, Name: "MySQL: SELECT … FOR UPDATE, UPDATE, INSERT order, COMMIT", Workers: probeWorkers,
			Do: func(ctx context.Context) error {
				return inTx(ctx, sqlDB, func(tx *sql.Tx) error {
					var available int
					err := tx.QueryRowContext(ctx, `SELECT available FROM stock_items WHERE sku = ? FOR UPDATE`, sku).Scan(&available)
					if err != nil {
						return err
					}
					_, err = tx.ExecContext(ctx, `UPDATE stock_items SET available = ?, version = version + 1, updated_at = ? WHERE sku = ?`,
						available-1, time.Now().UTC(), sku)
					if err != nil {
						return err
					}
					return insert(ctx, tx)
				})
			}},
		{Key: strategy.SQLBatched, Workers: 1, Orders: batchSize,
			Name: fmt.Sprintf("MySQL: %d orders per transaction: one conditional UPDATE by the sum, one multi-row INSERT, COMMIT (figures per order)", batchSize),
			Do: func(ctx context.Context) error {
				return inTx(ctx, sqlDB, func(tx *sql.Tx) error {
					now := time.Now().UTC()
					res, err := tx.ExecContext(ctx, `UPDATE stock_items SET available = available - ?, version = version + 1, updated_at = ?
						WHERE sku = ? AND available >= ?`, batchSize, now, sku, batchSize)
					if err != nil {
						return err
					}
					if n, err := res.RowsAffected(); err != nil || n != 1 {
						return errors.Join(err, errors.New("sold out"))
					}
					_, err = tx.ExecContext(ctx, batchInsert, batchArgs(sku, now)...)
					return err
				})
			}},
	}
}

// batchInsert inserts batchSize orders in one statement.
var batchInsert = `INSERT INTO orders (sku, user_id, quantity, status, created_at) VALUES ` +
	strings.TrimSuffix(strings.Repeat("(?, 'ceiling', 1, 'created', ?),", batchSize), ",")

func batchArgs(sku string, now time.Time) []any {
	args := make([]any, 0, 2*batchSize)
	for range batchSize {
		args = append(args, sku, now)
	}
	return args
}

func inTx(ctx context.Context, sqlDB *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// Lua a Redis-side stock would run: check and decrement in one step.
var decrement = redis.NewScript(`
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n < tonumber(ARGV[1]) then return -1 end
return redis.call('DECRBY', KEYS[1], ARGV[1])`)
