package lesson

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/stock"
)

// The lessons on the stock itself: a read-then-write sale, and a mutex
// that guards one process of several.

func init() {
	register(Lesson{Number: 1, Name: "oversell", Seed: "seed 002",
		Claim:    "read the stock, check it, then write it back, and concurrent buyers are sold more than there is (库存超卖)",
		Setup:    "20 buyers for 5 units; every buyer reads the stock before any of them writes, as concurrent requests interleave",
		Takeaway: "decide and take in one statement, UPDATE … SET available = available - 1 WHERE available >= 1, and check the rows it changed",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return oversell(ctx, env, "oversell-mistake", "read, then write what was read less one", readThenWrite)
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			return oversell(ctx, env, "oversell-fix", "UPDATE … WHERE available >= 1 (the atomic strategy)", conditional)
		},
	})
	register(Lesson{Number: 2, Name: "local-lock", Seed: "seed 002",
		Claim:    "synchronized or a Lock keeps buyers apart, until the shop runs as several JVM processes",
		Setup:    "15 buyers for 5 units, read-then-write under a lock; the holder works 50 ms between its read and its write",
		Takeaway: "a mutex guards one process; once the shop runs as several, only a lock they all share (Redis, ZooKeeper, the database) keeps them apart",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			one, err := localLocks(ctx, env, 1)
			if err != nil {
				return Trial{}, err
			}
			three, err := localLocks(ctx, env, 3)
			if err != nil {
				return Trial{}, err
			}
			return Trial{Name: "a sync.Mutex in each instance",
				Numbers:  map[string]int64{"orders_1_instance": int64(one.Orders), "oversold_1_instance": int64(one.Oversold), "orders_3_instances": int64(three.Orders), "oversold_3_instances": int64(three.Oversold)},
				Happened: fmt.Sprintf("1 instance: %d orders for 5 units; 3 instances: %d orders, %d oversold", one.Orders, three.Orders, three.Oversold),
				Failed:   one.Oversold == 0 && three.Oversold > 0}, nil
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			a, err := lockedSale(ctx, env, "local-lock-fix", 3, func(int) sync.Locker {
				return &spinLock{ctx: ctx, lock: newOwned(env.Redis, env.Prefix+"local-lock", time.Minute)}
			})
			if err != nil {
				return Trial{}, err
			}
			return auditTrial("a Redis lock (SET NX PX, compare-and-delete) shared by the 3 instances", a), nil
		},
	})
}

// sell is one buyer's purchase of one unit of sku, given the available
// stock it read.
type sell func(ctx context.Context, gdb *gorm.DB, sku, buyer string, read int) error

func readThenWrite(ctx context.Context, gdb *gorm.DB, sku, buyer string, read int) error {
	if read < 1 {
		return stock.ErrSoldOut
	}
	return gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`UPDATE stock_items SET available = ? WHERE sku = ?`, read-1, sku).Error; err != nil {
			return err
		}
		return insertOrder(tx, sku, buyer)
	})
}

func conditional(ctx context.Context, gdb *gorm.DB, sku, buyer string, _ int) error {
	return stock.NewAtomic(gdb).Adjust(ctx, sku, -1, ordered(sku, buyer))
}

// oversell runs 20 buyers for 5 units: all read, then all sell.
func oversell(ctx context.Context, env *Env, sale, name string, sell sell) (Trial, error) {
	sku, err := onSale(ctx, env, sale, 5)
	if err != nil {
		return Trial{}, err
	}
	reads, err := readStock(ctx, env, sku, 20)
	if err != nil {
		return Trial{}, err
	}
	for i, read := range reads {
		if err := sell(ctx, env.DB, sku, fmt.Sprint("buyer-", i), read); err != nil && !errors.Is(err, stock.ErrSoldOut) {
			return Trial{}, err
		}
	}
	a, err := audit.SKU(ctx, env.DB, sku, 0, nil)
	if err != nil {
		return Trial{}, err
	}
	return auditTrial(name, a), nil
}

// readStock reads sku's available n times, as n concurrent requests read
// it before any of them writes.
func readStock(ctx context.Context, env *Env, sku string, n int) ([]int, error) {
	reads := make([]int, n)
	for i := range reads {
		it, err := stock.Get(ctx, env.DB, sku)
		if err != nil {
			return nil, err
		}
		reads[i] = it.Available
	}
	return reads, nil
}

// localLocks sells under a sync.Mutex per instance.
func localLocks(ctx context.Context, env *Env, instances int) (audit.Audit, error) {
	mutexes := make([]sync.Mutex, instances)
	return lockedSale(ctx, env, fmt.Sprint("local-lock-", instances), instances, func(i int) sync.Locker { return &mutexes[i] })
}

// lockedSale runs 15 buyers for 5 units, spread over instances, each
// buyer reading and writing under the lock its instance gives it.
func lockedSale(ctx context.Context, env *Env, name string, instances int, lockOf func(instance int) sync.Locker) (audit.Audit, error) {
	sku, err := onSale(ctx, env, name, 5)
	if err != nil {
		return audit.Audit{}, err
	}
	var wg sync.WaitGroup
	errs := make([]error, 15)
	for i := range errs {
		wg.Go(func() {
			l := lockOf(i % instances)
			l.Lock()
			defer l.Unlock()
			it, err := stock.Get(ctx, env.DB, sku)
			if err == nil {
				time.Sleep(50 * time.Millisecond) // the holder's work
				err = readThenWrite(ctx, env.DB, sku, fmt.Sprint("buyer-", i), it.Available)
			}
			if !errors.Is(err, stock.ErrSoldOut) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return audit.Audit{}, err
	}
	return audit.SKU(ctx, env.DB, sku, 0, nil)
}

// spinLock is a Redis lock as a sync.Locker: it tries until it holds.
type spinLock struct {
	ctx  context.Context
	lock owned
}

func (s *spinLock) Lock() {
	for s.ctx.Err() == nil {
		if ok, err := s.lock.TryLock(s.ctx); ok && err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *spinLock) Unlock() { compareAndDelete(s.ctx, s.lock) }

// onSale puts units of the lesson's SKU name on sale.
func onSale(ctx context.Context, env *Env, name string, units int) (string, error) {
	sku := env.Prefix + name
	if err := env.DB.WithContext(ctx).Exec(`DELETE FROM orders WHERE sku = ?`, sku).Error; err != nil {
		return "", err
	}
	return sku, stock.Reset(ctx, env.DB, sku, units)
}

// insertOrder inserts one order of sku for buyer in tx, as bare as a
// lesson's transaction: one row, nothing else.
func insertOrder(tx *gorm.DB, sku, buyer string) error {
	return tx.Exec(`INSERT INTO orders (sku, user_id, quantity, status, created_at) VALUES (?, ?, 1, 'created', ?)`,
		sku, buyer, time.Now().UTC()).Error
}

// ordered is insertOrder as a guard runs it, in the guard's transaction.
func ordered(sku, buyer string) stock.Fn {
	return func(tx stock.Tx) error { return insertOrder(tx.Rows(), sku, buyer) }
}

// auditTrial is a trial whose numbers are the database's audit of a SKU.
func auditTrial(name string, a audit.Audit) Trial {
	return Trial{Name: name,
		Numbers:  map[string]int64{"units": int64(a.Initial), "orders": int64(a.Orders), "oversold": int64(a.Oversold), "left": int64(a.Available)},
		Happened: fmt.Sprintf("%d orders for %d units: %d oversold, %d left", a.Orders, a.Initial, a.Oversold, a.Available),
		Failed:   a.Oversold > 0}
}
