package lesson

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// The lessons on the order flow: a double click, and a double refund.

func init() {
	register(Lesson{Number: 10, Name: "duplicate-submit", Seed: "seed 002",
		Claim:    "a quick double click in the app sends the order twice, and the database gets it twice (表单重复提交)",
		Setup:    "one buyer's two identical requests arrive at once, 10 units on sale",
		Takeaway: "every order request carries an Idempotency-Key; a unique (user, key) index makes the second one a replay of the first",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return doubleClick(ctx, env, "mistake", "no Idempotency-Key", "")
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			return doubleClick(ctx, env, "fix", "one Idempotency-Key for both (order.Service)", "click-1")
		},
	})
	register(Lesson{Number: 11, Name: "double-refund", Seed: "seed 002",
		Claim:    "a refund checks that the order is paid, then returns the stock; two refunds of one order at once both pass the check",
		Setup:    "one order of 1 unit; two refunds of it read its status before either writes",
		Takeaway: "change the status conditionally, UPDATE … WHERE status = 'created', in the refund's transaction, and return the stock only if a row changed",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return doubleRefund(ctx, env, "mistake", "read the status, then write", func(svc *order.Service, o order.Order) error {
				var statuses [2]string
				for i := range statuses { // both read before either writes
					if err := env.DB.WithContext(ctx).Raw(`SELECT status FROM orders WHERE id = ?`, o.ID).Row().Scan(&statuses[i]); err != nil {
						return err
					}
				}
				for _, status := range statuses {
					if status != order.StatusCreated {
						continue
					}
					err := env.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
						if err := tx.Exec(`UPDATE orders SET status = ? WHERE id = ?`, order.StatusRefunded, o.ID).Error; err != nil {
							return err
						}
						return tx.Exec(`UPDATE stock_items SET available = available + ? WHERE sku = ?`, o.Quantity, o.SKU).Error
					})
					if err != nil {
						return err
					}
				}
				return nil
			})
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			return doubleRefund(ctx, env, "fix", "a conditional status change (order.Service.Refund)", func(svc *order.Service, o order.Order) error {
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for i := range errs {
					wg.Go(func() {
						if _, _, err := svc.Refund(ctx, o.ID, o.UserID, fmt.Sprint("refund-", i)); !errors.Is(err, order.ErrAlreadyRefunded) {
							errs[i] = err
						}
					})
				}
				wg.Wait()
				return errors.Join(errs...)
			})
		},
	})
}

// doubleClick sends one buyer's order twice at once, with key (or none).
func doubleClick(ctx context.Context, env *Env, trial, name, key string) (Trial, error) {
	sku, err := onSale(ctx, env, "duplicate-submit-"+trial, 10)
	if err != nil {
		return Trial{}, err
	}
	svc := order.NewService(env.DB, order.Guarded(stock.NewAtomic(env.DB), order.Rules{}), nil)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			_, _, errs[i] = svc.Place(ctx, order.PlaceRequest{SKU: sku, UserID: "clicker-" + trial, Quantity: 1, IdempotencyKey: key})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Trial{}, err
	}
	var orders int64
	if err := env.DB.WithContext(ctx).Raw(`SELECT COUNT(*) FROM orders WHERE sku = ?`, sku).Row().Scan(&orders); err != nil {
		return Trial{}, err
	}
	return Trial{Name: name, Numbers: map[string]int64{"requests": 2, "orders": orders},
		Happened: fmt.Sprintf("2 identical requests made %d orders", orders), Failed: orders > 1}, nil
}

// doubleRefund places one order and refunds it twice with refund.
func doubleRefund(ctx context.Context, env *Env, trial, name string, refund func(*order.Service, order.Order) error) (Trial, error) {
	sku, err := onSale(ctx, env, "double-refund-"+trial, 1)
	if err != nil {
		return Trial{}, err
	}
	svc := order.NewService(env.DB, order.Guarded(stock.NewAtomic(env.DB), order.Rules{}), nil)
	o, _, err := svc.Place(ctx, order.PlaceRequest{SKU: sku, UserID: "refunder", Quantity: 1, IdempotencyKey: "buy-" + trial})
	if err != nil {
		return Trial{}, err
	}
	if err := refund(svc, o); err != nil {
		return Trial{}, err
	}
	left, err := available(ctx, env, sku)
	if err != nil {
		return Trial{}, err
	}
	// The sale had 1 unit and sold it: what is available now was returned.
	return Trial{Name: name, Numbers: map[string]int64{"units_sold": 1, "units_returned": int64(left)},
		Happened: fmt.Sprintf("two refunds of 1 unit returned %d units to the stock", left), Failed: left > 1}, nil
}
