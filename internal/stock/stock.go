// Package stock holds the stock domain: the stock_items row, its errors, and
// the strategies that guard a change to it against concurrent buyers.
//
// Every strategy has the same shape, taken from the repository-with-closure
// pattern: Adjust(ctx, sku, delta, fn) applies delta to the SKU's stock and
// runs fn (the caller's own writes, such as the order row) in the same
// transaction, so that both commit or neither does. The strategies differ
// only in how they keep two buyers from spending the same unit.
package stock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/stockguard/shop/internal/backoff"
	"github.com/stockguard/shop/internal/db"
)

// Errors a strategy returns. Callers test them with errors.Is.
var (
	ErrNotFound = errors.New("stock: sku not found")
	ErrSoldOut  = errors.New("stock: sold out")
	// ErrBusy means the change could not be made before the ctx ended:
	// nothing was decided, and the caller may try again.
	ErrBusy = errors.New("stock: busy")
	// ErrFenced means a lock strategy's write was refused because a holder
	// with a newer fencing token has claimed the SKU: this one's lock had
	// expired. Nothing was changed, and the caller may try again.
	ErrFenced = errors.New("stock: fenced off by a newer lock holder")
)

// Item is one row of stock_items.
type Item struct {
	SKU       string `gorm:"column:sku;primaryKey"`
	Initial   int
	Available int
	Version   int64
	Fence     int64
	GivenBack int64 // give-backs so far (see giveBack, docs/locks.md#give-backs)
	UpdatedAt time.Time
}

// TableName tells GORM the table.
func (Item) TableName() string { return "stock_items" }

// Guard is a strategy: it applies delta to sku's stock and runs fn in the
// same transaction, so that both commit or neither does. AdjustLines does
// the same for a cart's lines, all of them or none: a refusal names every
// SKU that was short (ShortError).
type Guard interface {
	Adjust(ctx context.Context, sku string, delta int, fn Fn) error
	AdjustLines(ctx context.Context, lines []Line, fn Fn) error
}

// Get reads one item.
func Get(ctx context.Context, tx *gorm.DB, sku string) (Item, error) {
	var it Item
	err := tx.WithContext(ctx).Where("sku = ?", sku).Take(&it).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Item{}, fmt.Errorf("%w: %s", ErrNotFound, sku)
	}
	return it, err
}

// Reset sets sku's stock to quantity, creating the row if needed. It starts
// a new sale: the version and the fence start again from zero, and the
// movements from one initial movement, so it must not run while buyers are
// still being served.
func Reset(ctx context.Context, tx *gorm.DB, sku string, quantity int) error {
	it := Item{SKU: sku, Initial: quantity, Available: quantity, UpdatedAt: now()}
	return tx.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// A SKU sold out under a lease sells again only once it ended.
		if err := awaitLeases(tx, []Line{{SKU: sku, Delta: 1}}); err != nil {
			return err
		}
		err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "sku"}},
			DoUpdates: clause.AssignmentColumns([]string{"initial", "available", "version", "fence", "updated_at"}),
		}).Create(&it).Error
		if err != nil {
			return err
		}
		if err := Forget(tx, sku); err != nil {
			return err
		}
		return recordInitial(tx, sku, quantity)
	})
}

// Create sets sku up with quantity units, and its initial movement, unless
// it exists, and reports whether it did. tx should be a transaction.
func Create(tx *gorm.DB, sku string, quantity int) (created bool, err error) {
	it := Item{SKU: sku, Initial: quantity, Available: quantity, UpdatedAt: now()}
	res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&it)
	if res.Error != nil || res.RowsAffected != 1 {
		return false, res.Error
	}
	return true, recordInitial(tx, sku, quantity)
}

// Set makes sku's available n, and records the change as a set movement,
// which moves initial by as much, so that what the orders hold, initial
// less available, stays what it was. With expected, it changes nothing
// unless available is *expected (NotExpectedError). It returns the change. It
// runs in a guard's Fn: the guard has just written the row in tx, so it
// holds the row, and whatever the strategy guards it with (lock, fence,
// turn), until tx ends; no purchase commits between the read and the
// write, and the read sees the guard's own write.
func Set(tx *gorm.DB, sku string, n int, expected *int) (delta int, err error) {
	var available int
	if err := tx.Raw(`SELECT available FROM stock_items WHERE sku = ?`, sku).Row().Scan(&available); err != nil {
		return 0, err
	}
	if expected != nil && *expected != available {
		return 0, &NotExpectedError{SKU: sku, Available: available}
	}
	delta = n - available
	if err := tx.Exec(`UPDATE stock_items SET available = ?, version = version + 1, updated_at = ? WHERE sku = ?`, n, now(), sku).Error; err != nil {
		return 0, err
	}
	if err := awaitLeases(tx, []Line{{SKU: sku, Delta: delta}}); err != nil {
		return 0, err
	}
	return delta, Record(tx, Movement{SKU: sku, Delta: delta, Reason: ReasonSet, Actor: ActorAdmin})
}

func now() time.Time { return time.Now().UTC() }

// Transact runs fn in a transaction. Deadlocks and lock-wait timeouts roll
// the transaction back; it runs again after a jittered pause until it
// commits or ctx ends, which gives ErrBusy.
func Transact(ctx context.Context, gdb *gorm.DB, fn func(tx *gorm.DB) error) error {
	for attempt := 0; ; attempt++ {
		err := gdb.WithContext(ctx).Transaction(fn)
		if err == nil || !db.IsRetryable(err) {
			return busyIfDone(ctx, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// pause waits before the next attempt (see internal/backoff), or returns
// ErrBusy when ctx ends first.
func pause(ctx context.Context, attempt int) error {
	if err := backoff.Wait(ctx, attempt); err != nil {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return nil
}

// busyIfDone reports a failure caused by the ctx ending as ErrBusy: the
// transaction did not commit, so nothing was decided.
func busyIfDone(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrBusy) {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return err
}

// missing tells a refused conditional update on sku apart: the SKU does not
// exist (ErrNotFound), or it has too little stock (ErrSoldOut).
func missing(ctx context.Context, tx *gorm.DB, sku string) error {
	if _, err := Get(ctx, tx, sku); err != nil {
		return err
	}
	return soldOut(sku)
}
