package sale

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// probe is one raw operation on a backend, with no HTTP and no framework:
// database/sql, go-redis and go-zookeeper calls only. Looped, it shows the
// most the backend can do on one hot key on this machine, the ceiling of
// every strategy that runs through it.
type probe struct {
	Key  strategy.Ceiling
	Name string // what one operation is
	// Workers loop at once. Lock probes have 1: only one holder proceeds at
	// a time, so the loop is the fastest hand-over of one lock.
	Workers int
	Do      func(ctx context.Context) error
}

// probeWorkers is how many workers loop a probe that allows concurrency:
// enough to queue on the hot row or key, as a burst does.
const probeWorkers = 32

// measure loops p for d.
func (p probe) measure(ctx context.Context, d time.Duration) loadtest.BaselineResult {
	return loadtest.BaselineResult{Key: string(p.Key), Name: p.Name, Workers: p.Workers, Stats: loadtest.Loop(ctx, p.Workers, d, p.Do)}
}

// probeServers are the servers to probe; each probe runs only where its
// server is given.
type probeServers struct {
	DB          *gorm.DB // MySQL, with the shop's schema
	Redis       string   // address
	RedisPrefix string   // probe keys start with it
	ZK          []string
	ZKRoot      string // probe znodes go below it; created if missing
}

// ceilings returns the probes for the servers given. close removes what they
// created.
func ceilings(ctx context.Context, s probeServers) (probes []probe, close func() error, err error) {
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
	if s.DB != nil {
		sku := "baseline-" + tag
		if err := stock.Reset(ctx, s.DB, sku, math.MaxInt32); err != nil {
			return nil, nil, fmt.Errorf("sale: probe stock: %w", err)
		}
		closers = append(closers, func() error { return forget(context.Background(), s.DB, sku) })
		sqlDB, err := s.DB.DB()
		if err != nil {
			return nil, nil, err
		}
		probes = append(probes, sqlProbes(sqlDB, sku)...)
	}
	if s.Redis != "" {
		rdb := redis.NewClient(&redis.Options{Addr: s.Redis, PoolSize: probeWorkers})
		keys := []string{s.RedisPrefix + "baseline:" + tag + ":stock", s.RedisPrefix + "baseline:" + tag + ":lock"}
		closers = append(closers, func() error {
			return errors.Join(rdb.Del(context.Background(), keys...).Err(), rdb.Close())
		})
		if err := rdb.Set(ctx, keys[0], math.MaxInt64/2, 0).Err(); err != nil {
			return nil, nil, fmt.Errorf("sale: probe redis: %w", err)
		}
		probes = append(probes, redisProbes(rdb, keys[0], keys[1])...)
	}
	if len(s.ZK) > 0 {
		conn, _, err := zk.Connect(s.ZK, 10*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			return nil, nil, fmt.Errorf("sale: probe zookeeper: %w", err)
		}
		closers = append(closers, func() error { conn.Close(); return nil })
		dir := path.Join(s.ZKRoot, "baseline-"+tag)
		if err := mkdirs(conn, dir); err != nil {
			return nil, nil, fmt.Errorf("sale: probe zookeeper: %w", err)
		}
		closers = append(closers, func() error { return conn.Delete(dir, -1) })
		probes = append(probes, zkProbe(conn, dir))
	}
	return probes, close, nil
}

// sqlProbes run the statements of the atomic and pessimistic strategies on
// one hot row, each with its order insert, one transaction per order.
func sqlProbes(sqlDB *sql.DB, sku string) []probe {
	insert := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO orders (sku, user_id, quantity, status, created_at) VALUES (?, 'baseline', 1, 'created', ?)`,
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
	}
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

// The release of a Redis lock: delete the key only if it holds our token.
var release = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func redisProbes(rdb *redis.Client, stockKey, lockKey string) []probe {
	return []probe{
		{Key: strategy.RedisLua, Name: "Redis: Lua check-and-DECRBY of one key", Workers: probeWorkers,
			Do: func(ctx context.Context) error { return decrement.Run(ctx, rdb, []string{stockKey}, 1).Err() }},
		{Key: strategy.RedisLock, Name: "Redis lock: SET NX PX with a random token, Lua compare-and-delete", Workers: 1,
			Do: func(ctx context.Context) error {
				token := rand.Text()
				ok, err := rdb.SetNX(ctx, lockKey, token, 10*time.Second).Result()
				if err != nil || !ok {
					return errors.Join(err, errors.New("lock not obtained"))
				}
				return release.Run(ctx, rdb, []string{lockKey}, token).Err()
			}},
	}
}

func zkProbe(conn *zk.Conn, dir string) probe {
	return probe{Key: strategy.ZooKeeperLock, Name: "ZooKeeper lock: create ephemeral sequential node, list children, delete", Workers: 1,
		Do: func(ctx context.Context) error {
			node, err := conn.Create(dir+"/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			if err != nil {
				return err
			}
			if _, _, err := conn.Children(dir); err != nil {
				return err
			}
			return conn.Delete(node, -1)
		}}
}

// mkdirs creates p and its parents.
func mkdirs(conn *zk.Conn, p string) error {
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			_, err := conn.Create(p[:i], nil, 0, zk.WorldACL(zk.PermAll))
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return fmt.Errorf("create %s: %w", p[:i], err)
			}
		}
	}
	return nil
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
