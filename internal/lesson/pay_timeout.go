package lesson

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// The lesson on the payment window: the job that cancels the orders not
// paid in time, and the payment callbacks that land at the deadline.

const (
	payBuyers = 10
	// payWindow leaves the mistake's callbacks time to find their orders
	// pending and in time, one after another, on a loaded machine.
	payWindow = time.Second
	// paySpread is how far apart the fix's callbacks land, around their
	// deadlines: the first before, the last after.
	paySpread = 5 * time.Millisecond
)

func init() {
	register(Lesson{Number: 13, Name: "pay-vs-timeout", Seed: "seed 001",
		Claim: "a scheduled job (定时任务) runs on one node at a time, and another takes over when that node fails; " +
			"here it is the job that cancels the orders not paid in time and returns their stock",
		Setup: fmt.Sprintf("%d units, %d orders to be paid within %s; their payment callbacks land at the deadline while the job cancels what is past it; then %d more buyers come",
			payBuyers, payBuyers, payWindow, payBuyers),
		Takeaway: "one node running the job does not keep it from racing the callbacks: the order row must. Pay and expiry each change it with one conditional UPDATE " +
			"(… WHERE status = 'pending', with the deadline on the database's clock) in the transaction that moves the stock; whichever commits first wins, and the other changes nothing",
		Mistake: payRaceNaive,
		Fix:     payRaceFixed,
	})
}

// payRaceNaive: the job reads the pending orders past their deadline, then
// returns their stock and writes cancelled, whatever the order is by then;
// each callback checked its order was pending and in time, then writes
// paid, whatever the order is by then. Half the callbacks write between
// the job's read and its write, half after it.
func payRaceNaive(ctx context.Context, env *Env) (Trial, error) {
	svc, sku, orders, err := windowSale(ctx, env, "mistake")
	if err != nil {
		return Trial{}, err
	}
	gdb := env.DB.WithContext(ctx)
	for _, o := range orders { // each callback's check, in time
		var status string
		if err := gdb.Raw(`SELECT status FROM orders WHERE id = ?`, o.ID).Row().Scan(&status); err != nil {
			return Trial{}, err
		}
		now, err := db.Now(gdb)
		if err != nil {
			return Trial{}, err
		}
		if status != order.StatusPending || !now.Before(*o.ExpiresAt) {
			return Trial{}, fmt.Errorf("order %d is %s at %s, deadline %s: the callbacks came too late to race", o.ID, status, now, o.ExpiresAt)
		}
	}
	if err := pastDeadline(ctx, env, orders); err != nil {
		return Trial{}, err
	}
	now, err := db.Now(gdb)
	if err != nil {
		return Trial{}, err
	}
	var due []order.Order // the job's read
	if err := gdb.Where("sku = ? AND status = ? AND expires_at <= ?", sku, order.StatusPending, now).Find(&due).Error; err != nil {
		return Trial{}, err
	}
	naivePay := func(o order.Order) error {
		return gdb.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec(`UPDATE orders SET status = ?, paid_at = ?, payment_id = ? WHERE id = ?`, order.StatusPaid, now, payID(o), o.ID).Error; err != nil {
				return err
			}
			return tx.Exec(`INSERT INTO payments (payment_id, order_id, status, created_at) VALUES (?, ?, ?, ?)`, payID(o), o.ID, order.PaymentPaid, now).Error
		})
	}
	for _, o := range orders[:len(orders)/2] {
		if err := naivePay(o); err != nil {
			return Trial{}, err
		}
	}
	for _, o := range due { // the job's write
		err := gdb.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec(`UPDATE stock_items SET available = available + ? WHERE sku = ?`, o.Quantity, o.SKU).Error; err != nil {
				return err
			}
			return tx.Exec(`UPDATE orders SET status = ?, cancelled_at = ? WHERE id = ?`, order.StatusCancelled, now, o.ID).Error
		})
		if err != nil {
			return Trial{}, err
		}
	}
	for _, o := range orders[len(orders)/2:] {
		if err := naivePay(o); err != nil {
			return Trial{}, err
		}
	}
	return payTrial(ctx, env, svc, sku, "read the status, then write: an expiry job, and payment callbacks")
}

// payRaceFixed: the callbacks land around their deadlines, from before to
// after, through Service.Pay, while the job, Service.Expire, runs again
// and again.
func payRaceFixed(ctx context.Context, env *Env) (Trial, error) {
	svc, sku, orders, err := windowSale(ctx, env, "fix")
	if err != nil {
		return Trial{}, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(orders))
	for i, o := range orders {
		wg.Go(func() {
			land := o.ExpiresAt.Add(time.Duration(i-len(orders)/2) * paySpread)
			select {
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			case <-time.After(time.Until(land)):
			}
			if _, _, err := svc.Pay(ctx, o.ID, payID(o)); err != nil && !errors.Is(err, order.ErrOrderExpired) {
				errs[i] = err
			}
		})
	}
	landed := make(chan struct{})
	go func() { wg.Wait(); close(landed) }()
	for running := true; running; {
		select {
		case <-landed:
			running = false // one more run, for the orders whose callbacks came late
		case <-time.After(time.Millisecond):
		}
		if _, err := svc.Expire(ctx, 0); err != nil {
			<-landed
			return Trial{}, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Trial{}, err
	}
	return payTrial(ctx, env, svc, sku, "conditional transitions (order.Service.Pay and order.Service.Expire)")
}

// windowSale puts payBuyers units on sale and places an order of one unit
// for each of payBuyers buyers, to be paid within payWindow.
func windowSale(ctx context.Context, env *Env, trial string) (*order.Service, string, []order.Order, error) {
	sku, err := onSale(ctx, env, "pay-vs-timeout-"+trial, payBuyers)
	if err != nil {
		return nil, "", nil, err
	}
	svc := order.NewService(env.DB, order.Guarded(stock.NewAtomic(env.DB), order.Rules{Window: payWindow}), nil)
	orders := make([]order.Order, payBuyers)
	for i := range orders {
		if orders[i], _, err = svc.Place(ctx, order.PlaceRequest{SKU: sku, UserID: fmt.Sprint("buyer-", i), Quantity: 1, IdempotencyKey: sku}); err != nil {
			return nil, "", nil, err
		}
	}
	return svc, sku, orders, nil
}

// pastDeadline waits until the database's clock is past every order's
// deadline.
func pastDeadline(ctx context.Context, env *Env, orders []order.Order) error {
	for {
		now, err := db.Now(env.DB.WithContext(ctx))
		if err != nil {
			return err
		}
		last := orders[0].ExpiresAt
		for _, o := range orders {
			if o.ExpiresAt.After(*last) {
				last = o.ExpiresAt
			}
		}
		if now.After(*last) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(last.Sub(now)):
		}
	}
}

// payID is the payment id of o's callback.
func payID(o order.Order) string { return fmt.Sprintf("%s-pay-%d", o.SKU, o.ID) }

// payTrial lets payBuyers more buyers buy and pay what is left of sku, and
// reads the audit.
func payTrial(ctx context.Context, env *Env, svc *order.Service, sku, name string) (Trial, error) {
	resold := 0
	for i := range payBuyers {
		o, _, err := svc.Place(ctx, order.PlaceRequest{SKU: sku, UserID: fmt.Sprint("later-", i), Quantity: 1, IdempotencyKey: sku})
		if errors.Is(err, stock.ErrSoldOut) {
			continue
		}
		if err != nil {
			return Trial{}, err
		}
		if _, _, err := svc.Pay(ctx, o.ID, payID(o)); err != nil {
			return Trial{}, err
		}
		resold++
	}
	a, err := audit.SKU(ctx, env.DB, sku, 0, nil)
	if err != nil {
		return Trial{}, err
	}
	var paid, orphaned int64
	err = env.DB.WithContext(ctx).Raw(`SELECT
		(SELECT COUNT(*) FROM orders WHERE sku = ? AND status = ?),
		(SELECT COUNT(*) FROM payments p JOIN orders o ON o.id = p.order_id WHERE o.sku = ? AND p.status = ?)`,
		sku, order.StatusPaid, sku, order.PaymentOrphaned).Row().Scan(&paid, &orphaned)
	if err != nil {
		return Trial{}, err
	}
	return Trial{Name: name,
		Numbers: map[string]int64{"units": int64(a.Initial), "paid_orders": paid, "paid_and_restocked": int64(a.PaidAndReturned),
			"resold": int64(resold), "oversold": int64(a.Oversold), "orphaned_payments": orphaned},
		Happened: fmt.Sprintf("%d orders both paid and restocked; %d units sold again; %d paid orders for %d units: %d oversold",
			a.PaidAndReturned, resold, paid, a.Initial, a.Oversold),
		Failed: a.PaidAndReturned > 0 || a.Oversold > 0 || a.Drift != 0}, nil
}
