package lesson

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/stock"
)

// The lesson on a purchase of several SKUs: each buyer locks every SKU of
// its cart, then takes one unit of each in one transaction, all or none.
// The shop's carts do what the fix does: every strategy takes a cart's
// SKUs (locks, rows, queue turns) in ascending order (stock.Sorted), and
// the lock strategies release in reverse (stock.Locked.AdjustLines).

const (
	// orderUnits is the stock of each of the two SKUs.
	orderUnits = 5
	// orderWait is each buyer's deadline, on real time: the locks' holders
	// are alive and their watchdogs renew them, so no TTL ends the wait.
	// The mistake's buyers wait all of it out; the fix's, served one after
	// the other, must finish well within it on a loaded machine too: they
	// took 838 ms of a 1 s deadline on two cores at a load of 15.
	orderWait = 5 * time.Second
)

func init() {
	register(Lesson{Number: 14, Name: "lock-order", Seed: "seed 002",
		Claim: "a purchase touches several resources (each SKU of a cart): lock them all, take them all, or roll all of it back",
		Setup: fmt.Sprintf("%d units each of SKUs A and B; two buyers each buy one of both, buyer 1's cart lists A then B, buyer 2's B then A; "+
			"each has tried its first lock before either asks for its second; both give up at one deadline, %s away", orderUnits, orderWait),
		Takeaway: "lock a cart's resources in one global order, ascending SKU, and release them in reverse. Locked in request order, each buyer holds what the other waits for " +
			"until its deadline. Row locks deadlock the same way (MySQL error 1213, rows locked in one order and updated in another): take rows in ascending SKU order too",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return lockCarts(ctx, env, "mistake", "each buyer locks its cart's SKUs in the order it listed them", func(cart []string) []string {
				return cart
			})
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			return lockCarts(ctx, env, "fix", "each buyer locks its cart's SKUs in ascending order, and releases in reverse", func(cart []string) []string {
				return slices.Sorted(slices.Values(cart))
			})
		},
	})
}

// lockCarts runs the two buyers of lock-order, each locking its cart's
// SKUs in the order that order gives, on its own lock.Redis (two
// instances of the shop).
func lockCarts(ctx context.Context, env *Env, trial, name string, order func(cart []string) []string) (Trial, error) {
	a, err := onSale(ctx, env, "lock-order-"+trial+"-a", orderUnits)
	if err != nil {
		return Trial{}, err
	}
	b, err := onSale(ctx, env, "lock-order-"+trial+"-b", orderUnits)
	if err != nil {
		return Trial{}, err
	}
	carts := [][]string{{a, b}, {b, a}}
	opts := &lock.RedisOptions{Prefix: env.Prefix + "lock-order:" + trial + ":"}
	// One deadline for both, as for two requests sent at once with the same
	// timeout. A buyer that gave up releases what it holds once both have
	// been answered: a release a moment after the deadline could otherwise
	// still hand the other its lock, a moment past its own.
	began := time.Now() // each wait counts from here, the deadline's start
	deadline := began.Add(orderWait)
	var tried, answered sync.WaitGroup
	tried.Add(len(carts))
	answered.Add(len(carts))
	errs := make([]error, len(carts))
	waited := make([]time.Duration, len(carts))
	var wg sync.WaitGroup
	for i, cart := range carts {
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			errs[i] = buyCart(ctx, env.DB, lock.NewRedis(env.Redis, opts), order(cart), fmt.Sprint("buyer-", i+1), func() {
				tried.Done()
				tried.Wait()
			}, func(err error) {
				answered.Done()
				if err != nil {
					answered.Wait()
				}
			})
			waited[i] = time.Since(began)
		})
	}
	wg.Wait()
	busy := 0
	for _, err := range errs {
		switch {
		case errors.Is(err, stock.ErrBusy):
			busy++
		case err != nil:
			return Trial{}, err
		}
	}
	leftA, err := available(ctx, env, a)
	if err != nil {
		return Trial{}, err
	}
	leftB, err := available(ctx, env, b)
	if err != nil {
		return Trial{}, err
	}
	var served int64
	if err := env.DB.WithContext(ctx).Raw(`SELECT COUNT(DISTINCT user_id) FROM orders WHERE sku IN (?, ?)`, a, b).Row().Scan(&served); err != nil {
		return Trial{}, err
	}
	longest := slices.Max(waited).Milliseconds()
	return Trial{Name: name,
		Numbers: map[string]int64{"buyers": int64(len(carts)), "served": served, "busy_answers": int64(busy),
			"stock_left_a": int64(leftA), "stock_left_b": int64(leftB), "waited_ms": longest, "deadline_ms": orderWait.Milliseconds()},
		Happened: fmt.Sprintf("%d of %d buyers served, %d answered busy; the last answer came after %d ms; A has %d of %d units left, B %d",
			served, len(carts), busy, longest, leftA, orderUnits, leftB),
		Failed: busy > 0 || served < int64(len(carts))}, nil
}

// buyCart locks the SKUs of cart in the order given, then takes one unit
// of each, and an order for each, in one transaction. A lock not taken
// before ctx ends answers busy, with nothing taken. locked runs once the
// locks have been taken, or not, before any is released.
func buyCart(ctx context.Context, gdb *gorm.DB, l lock.Locker, cart []string, buyer string, tried func(), locked func(error)) error {
	names := make([]string, len(cart))
	for i, sku := range cart {
		names[i] = stock.LockName(sku)
	}
	unlock, err := lockInOrder(ctx, l, names, tried)
	locked(err)
	defer unlock()
	if err != nil {
		return fmt.Errorf("%w: acquire: %w", stock.ErrBusy, err)
	}
	err = gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, sku := range cart {
			res := tx.Exec(`UPDATE stock_items SET available = available - 1 WHERE sku = ? AND available >= 1`, sku)
			if res.Error == nil && res.RowsAffected == 0 {
				res.Error = fmt.Errorf("%w: %s", stock.ErrSoldOut, sku)
			}
			if res.Error != nil {
				return res.Error // and the units taken before it go back
			}
			if err := insertOrder(tx, sku, buyer); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && ctx.Err() != nil && !errors.Is(err, stock.ErrSoldOut) {
		return fmt.Errorf("%w: %w", stock.ErrBusy, err) // rolled back: nothing taken
	}
	return err
}

// lockInOrder takes the locks named, one after another in the order
// given, each waiting until ctx ends; tried runs once the first has been
// tried, taken or found held. If one is not taken, it stops and returns
// why. unlock releases those it holds, last first.
func lockInOrder(ctx context.Context, l lock.Locker, names []string, tried func()) (unlock func(), err error) {
	var held []*lock.Lease
	unlock = func() {
		for _, lease := range slices.Backward(held) {
			lease.Release(context.WithoutCancel(ctx))
		}
	}
	for i, name := range names {
		lease, err := l.TryAcquire(ctx, name)
		if i == 0 {
			tried()
		}
		if errors.Is(err, lock.ErrLocked) {
			lease, err = l.Acquire(ctx, name)
		}
		if err != nil {
			return unlock, err
		}
		held = append(held, lease)
	}
	return unlock, nil
}
