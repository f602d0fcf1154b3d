package lesson

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/stock"
)

func init() {
	register(Lesson{Number: 9, Name: "optimistic-collapse", Seed: "seed 002",
		Claim:    "an optimistic version check sells without locks: read the version, write only if it is unchanged, retry a few times",
		Setup:    "100 buyers for 50 units of one row; each round, every buyer still trying reads the row, then all compare-and-set at once",
		Takeaway: "on a hot row, a bounded retry loop turns buyers away while stock is left; retry until the stock is truly short (or queue the attempts), or use a conditional UPDATE",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return collapse(ctx, env, "optimistic-collapse-mistake", "read the version, compare-and-set, give up after 3 tries", naiveOptimistic)
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			return collapse(ctx, env, "optimistic-collapse-fix", "the optimistic strategy: a fresh read and a jittered pause after each miss, until the stock is short", func(ctx context.Context, gdb *gorm.DB, sku string, buyers int) (int, error) {
				guard := stock.NewOptimistic(gdb)
				var wg sync.WaitGroup
				errs := make([]error, buyers)
				for i := range errs {
					wg.Go(func() {
						if err := guard.Adjust(ctx, sku, -1, ordered(sku, fmt.Sprint("buyer-", i))); !errors.Is(err, stock.ErrSoldOut) {
							errs[i] = err
						}
					})
				}
				wg.Wait()
				return 0, errors.Join(errs...) // it never answers busy without an error
			})
		},
	})
}

// naiveOptimistic is the retry loop of many shops: 3 tries, then "busy,
// try again". Each round every buyer reads before any writes, as a burst's
// buyers do, so that one compare-and-set per round wins.
func naiveOptimistic(ctx context.Context, gdb *gorm.DB, sku string, buyers int) (busy int, err error) {
	trying := make([]int, buyers)
	for i := range trying {
		trying[i] = i
	}
	for range 3 {
		reads := make([]stock.Item, len(trying))
		for i := range trying {
			if reads[i], err = stock.Get(ctx, gdb, sku); err != nil {
				return 0, err
			}
		}
		won := make([]bool, len(trying))
		var wg sync.WaitGroup
		errs := make([]error, len(trying))
		for i, buyer := range trying {
			wg.Go(func() {
				it := reads[i]
				if it.Available < 1 {
					won[i] = true // sold out: an answer, not a retry
					return
				}
				errs[i] = gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
					res := tx.Exec(`UPDATE stock_items SET available = ?, version = version + 1 WHERE sku = ? AND version = ?`, it.Available-1, sku, it.Version)
					if res.Error != nil || res.RowsAffected == 0 {
						return res.Error
					}
					won[i] = true
					return insertOrder(tx, sku, fmt.Sprint("buyer-", buyer))
				})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
		var next []int
		for i, buyer := range trying {
			if !won[i] {
				next = append(next, buyer)
			}
		}
		trying = next
	}
	return len(trying), nil
}

// collapse runs 100 buyers for 50 units with sell, and audits the row.
func collapse(ctx context.Context, env *Env, sale, name string, sell func(ctx context.Context, gdb *gorm.DB, sku string, buyers int) (busy int, err error)) (Trial, error) {
	sku, err := onSale(ctx, env, sale, 50)
	if err != nil {
		return Trial{}, err
	}
	busy, err := sell(ctx, env.DB, sku, 100)
	if err != nil {
		return Trial{}, err
	}
	a, err := audit.SKU(ctx, env.DB, sku, 0, nil)
	if err != nil {
		return Trial{}, err
	}
	return Trial{Name: name,
		Numbers:  map[string]int64{"buyers": 100, "units": int64(a.Initial), "orders": int64(a.Orders), "left": int64(a.Available), "oversold": int64(a.Oversold), "turned_away_busy": int64(busy)},
		Happened: fmt.Sprintf("%d of %d units sold, %d left, while %d buyers were turned away busy", a.Sold, a.Initial, a.Available, busy),
		Failed:   a.Oversold > 0 || a.Available > 0 && busy > 0}, nil
}
