// Package order places orders: each one takes stock through the configured
// guard and inserts its order row in the same transaction, so an order
// exists exactly when its stock was taken.
package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/stock"
)

// Errors of the service. Callers test them with errors.Is.
var (
	ErrNotFound        = errors.New("order: not found")
	ErrAlreadyRefunded = errors.New("order: already refunded")
	ErrLimitReached    = errors.New("order: per-user limit reached")
	// ErrKeyReused means the user's idempotency key already names an order
	// for another SKU or quantity.
	ErrKeyReused = errors.New("order: idempotency key already used for another order")
)

// Status of an order.
const (
	StatusCreated  = "created"
	StatusRefunded = "refunded"
)

// Order is one row of orders.
type Order struct {
	ID             int64
	SKU            string `gorm:"column:sku"`
	UserID         string
	Quantity       int
	Status         string
	IdempotencyKey *string
	CreatedAt      time.Time
	RefundedAt     *time.Time
	RefundKey      *string
}

// Options tune a Service; nil is valid.
type Options struct {
	// PerUserLimit is the most units of one SKU a user may hold in live
	// orders; 0 means no limit.
	PerUserLimit int
	// Keys, when set, has the service keep its buyers' Idempotency-Keys
	// for orders (KeepsKeys, kept.go).
	Keys *KeyOptions
}

// Service places, refunds and reads orders.
type Service struct {
	db    *gorm.DB
	guard stock.Guard
	limit int
	reads *firstReads
	keys  *keys // nil: the caller keeps them
}

// NewService returns a Service whose stock changes go through guard.
func NewService(gdb *gorm.DB, guard stock.Guard, opts *Options) *Service {
	s := &Service{db: gdb, guard: guard, reads: newFirstReads(gdb)}
	if opts != nil {
		s.limit = opts.PerUserLimit
		if opts.Keys != nil {
			s.keys = newKeys(opts.Keys)
		}
	}
	return s
}

// PlaceRequest is a validated order request.
type PlaceRequest struct {
	SKU            string
	UserID         string
	Quantity       int
	IdempotencyKey string // optional
}

// Place takes the stock and creates the order in one transaction. When the
// user already has an order under the same idempotency key, that order is
// returned with replayed set, and no stock is taken.
func (s *Service) Place(ctx context.Context, r PlaceRequest) (o Order, replayed bool, err error) {
	if _, own := s.guard.(keyKeeper); s.keys != nil && r.IdempotencyKey != "" && !own {
		o, replayed, err = s.keys.place(ctx, r, func() (Order, bool, error) { return s.placeOnce(ctx, r) })
	} else {
		o, replayed, err = s.placeOnce(ctx, r)
	}
	if s.KeepsKeys() {
		countKeyAnswer(replayed, err)
	}
	return o, replayed, err
}

func (s *Service) placeOnce(ctx context.Context, r PlaceRequest) (Order, bool, error) {
	if p, ok := s.guard.(placer); ok && r.IdempotencyKey != "" {
		return p.place(ctx, r, s.limit)
	}
	return s.place(ctx, r)
}

// errAnswered ends a purchase that its first read answered.
var errAnswered = errors.New("order: answered by the first read")

func (s *Service) place(ctx context.Context, r PlaceRequest) (Order, bool, error) {
	o := Order{SKU: r.SKU, UserID: r.UserID, Quantity: r.Quantity, Status: StatusCreated, CreatedAt: createdAt()}
	if r.IdempotencyKey != "" {
		o.IdempotencyKey = &r.IdempotencyKey
	}
	fn := func(tx *gorm.DB) error {
		if err := s.hold(tx, r.UserID, r.SKU, r.Quantity); err != nil {
			return err
		}
		return tx.Create(&o).Error
	}
	var err error
	if f, ok := s.guard.(firstReader); ok && r.IdempotencyKey != "" {
		var first placed // the first read's answer, if it ended the purchase
		answered := false
		err = f.AdjustAfter(ctx, r.SKU, -r.Quantity, func(ctx context.Context) error {
			first.o, first.replayed, first.err = s.reads.first(ctx, r)
			if answered = first.replayed || first.err != nil; answered {
				return errAnswered
			}
			return nil
		}, fn)
		if answered {
			return first.o, first.replayed, first.err
		}
	} else {
		err = s.guard.Adjust(ctx, r.SKU, -r.Quantity, fn)
	}
	if db.IsDuplicate(err) {
		return s.replay(ctx, r)
	}
	if err != nil {
		return s.reads.checkRefusal(ctx, r, Order{}, false, fmt.Errorf("order: place: %w", err))
	}
	return o, false, nil
}

// replay answers a request whose idempotency key already has an order: the
// database's unique index, the last line of defence when the key store has
// forgotten the key.
func (s *Service) replay(ctx context.Context, r PlaceRequest) (Order, bool, error) {
	o, found, err := existing(ctx, s.db, r)
	if err == nil && !found {
		err = fmt.Errorf("order: replay: %w", gorm.ErrRecordNotFound)
	}
	return o, found, err
}

// hold adds units to what the user holds of sku and refuses the order if
// that passes the limit. The upsert locks the user's row until the
// transaction ends, so a burst of one user's orders passes it one at a time
// whatever the stock strategy.
func (s *Service) hold(tx *gorm.DB, userID, sku string, units int) error {
	if s.limit <= 0 {
		return nil
	}
	err := tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "user_id"}, {Name: "sku"}},
		DoUpdates: clause.Assignments(map[string]any{"units": gorm.Expr("units + ?", units)}),
	}).Create(&purchase{UserID: userID, SKU: sku, Units: units}).Error
	if err != nil {
		return err
	}
	var held int
	if err := tx.Model(&purchase{}).Where("user_id = ? AND sku = ?", userID, sku).Select("units").Scan(&held).Error; err != nil {
		return err
	}
	if held > s.limit {
		return fmt.Errorf("%w: %s holds %d of %s, the limit is %d", ErrLimitReached, userID, held-units, sku, s.limit)
	}
	return nil
}

// purchase is one row of user_purchases.
type purchase struct {
	UserID string
	SKU    string `gorm:"column:sku"`
	Units  int
}

func (purchase) TableName() string { return "user_purchases" }

// Refund returns an order's stock and marks it refunded, in one transaction
// under the same guard as a purchase. The conditional status change lets
// exactly one of any number of concurrent refunds through. A user who does
// not own the order is told it does not exist. A refund already made under
// the same idempotency key is returned with replayed set.
func (s *Service) Refund(ctx context.Context, id int64, userID, key string) (o Order, replayed bool, err error) {
	o, err = s.Owned(ctx, id, userID)
	if err != nil {
		return Order{}, false, err
	}
	if o.Status == StatusCreated {
		refundedAt := time.Now().UTC()
		adjust := func(fn stock.Fn) error { return s.guard.Adjust(ctx, o.SKU, o.Quantity, fn) }
		if r, ok := s.guard.(refunder); ok {
			adjust = func(fn stock.Fn) error { return r.refund(ctx, o, fn) }
		}
		err = adjust(func(tx *gorm.DB) error {
			res := tx.Model(&Order{}).Where("id = ? AND status = ?", id, StatusCreated).
				Updates(map[string]any{"status": StatusRefunded, "refunded_at": refundedAt, "refund_key": nullable(key)})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return ErrAlreadyRefunded
			}
			return s.release(tx, o)
		})
		if err == nil {
			o.Status, o.RefundedAt, o.RefundKey = StatusRefunded, &refundedAt, nullable(key)
			return o, false, nil
		}
		if !errors.Is(err, ErrAlreadyRefunded) {
			return Order{}, false, fmt.Errorf("order: refund: %w", err)
		}
		if o, err = s.Get(ctx, id); err != nil {
			return Order{}, false, err
		}
	}
	if key != "" && o.RefundKey != nil && *o.RefundKey == key {
		return o, true, nil
	}
	return Order{}, false, fmt.Errorf("%w: order %d", ErrAlreadyRefunded, id)
}

// release takes a refunded order's units off what its user holds.
func (s *Service) release(tx *gorm.DB, o Order) error {
	if s.limit <= 0 {
		return nil
	}
	return tx.Model(&purchase{}).Where("user_id = ? AND sku = ?", o.UserID, o.SKU).
		Update("units", gorm.Expr("units - ?", o.Quantity)).Error
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ListRequest selects a page of a user's orders, oldest first.
type ListRequest struct {
	UserID string
	SKU    string // optional
	After  int64  // the last id of the previous page; 0 for the first
	Limit  int
}

// List returns a page of the user's orders.
func (s *Service) List(ctx context.Context, r ListRequest) ([]Order, error) {
	q := s.db.WithContext(ctx).Where("user_id = ? AND id > ?", r.UserID, r.After)
	if r.SKU != "" {
		q = q.Where("sku = ?", r.SKU)
	}
	var orders []Order
	if err := q.Order("id").Limit(r.Limit).Find(&orders).Error; err != nil {
		return nil, fmt.Errorf("order: list: %w", err)
	}
	return orders, nil
}

// Get reads one order.
func (s *Service) Get(ctx context.Context, id int64) (Order, error) {
	return take(s.db.WithContext(ctx).Where("id = ?", id), id)
}

// Owned reads one order of userID: another user's order is not found, as
// one that does not exist.
func (s *Service) Owned(ctx context.Context, id int64, userID string) (Order, error) {
	return take(s.db.WithContext(ctx).Where("id = ? AND user_id = ?", id, userID), id)
}

func take(q *gorm.DB, id int64) (Order, error) {
	var o Order
	err := q.Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return Order{}, fmt.Errorf("order: get: %w", err)
	}
	return o, nil
}
