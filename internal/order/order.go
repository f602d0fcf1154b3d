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

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/stock"
)

// ErrNotFound means no such order.
var ErrNotFound = errors.New("order: not found")

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
}

// Guard is what the service needs of a stock strategy: apply delta to the
// SKU's stock and run fn in the same transaction.
type Guard interface {
	Adjust(ctx context.Context, sku string, delta int, fn stock.Fn) error
}

// Service places and reads orders.
type Service struct {
	db    *gorm.DB
	guard Guard
}

// NewService returns a Service whose stock changes go through guard.
func NewService(gdb *gorm.DB, guard Guard) *Service {
	return &Service{db: gdb, guard: guard}
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
	o = Order{SKU: r.SKU, UserID: r.UserID, Quantity: r.Quantity, Status: StatusCreated, CreatedAt: time.Now().UTC()}
	if r.IdempotencyKey != "" {
		o.IdempotencyKey = &r.IdempotencyKey
	}
	err = s.guard.Adjust(ctx, r.SKU, -r.Quantity, func(tx *gorm.DB) error {
		return tx.Create(&o).Error
	})
	if db.IsDuplicate(err) {
		o, err = s.byKey(ctx, r.UserID, r.IdempotencyKey)
		return o, err == nil, err
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("order: place: %w", err)
	}
	return o, false, nil
}

func (s *Service) byKey(ctx context.Context, userID, key string) (Order, error) {
	var o Order
	err := s.db.WithContext(ctx).Where("user_id = ? AND idempotency_key = ?", userID, key).Take(&o).Error
	if err != nil {
		return Order{}, fmt.Errorf("order: by key: %w", err)
	}
	return o, nil
}

// Get reads one order.
func (s *Service) Get(ctx context.Context, id int64) (Order, error) {
	var o Order
	err := s.db.WithContext(ctx).Take(&o, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return Order{}, fmt.Errorf("order: get: %w", err)
	}
	return o, nil
}

// Stock is a SKU's stock as the API shows it.
type Stock struct {
	SKU       string `json:"sku"`
	Initial   int    `json:"initial"`
	Available int    `json:"available"`
	// Sold counts the units of live orders. Read from the orders rather
	// than derived from available, it shows an oversell as sold > initial.
	Sold int `json:"sold"`
}

// Stock reads sku's stock and the units sold.
func (s *Service) Stock(ctx context.Context, sku string) (Stock, error) {
	it, err := stock.Get(ctx, s.db, sku)
	if err != nil {
		return Stock{}, err
	}
	var sold int
	err = s.db.WithContext(ctx).Model(&Order{}).Where("sku = ? AND status = ?", sku, StatusCreated).
		Select("COALESCE(SUM(quantity), 0)").Scan(&sold).Error
	if err != nil {
		return Stock{}, fmt.Errorf("order: sold: %w", err)
	}
	return Stock{SKU: it.SKU, Initial: it.Initial, Available: it.Available, Sold: sold}, nil
}

// ResetStock sets sku's stock to quantity and deletes its orders, in one
// transaction, so that a load test can run again from a known state.
func (s *Service) ResetStock(ctx context.Context, sku string, quantity int) (Stock, error) {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("sku = ?", sku).Delete(&Order{}).Error; err != nil {
			return err
		}
		return stock.Reset(ctx, tx, sku, quantity)
	})
	if err != nil {
		return Stock{}, fmt.Errorf("order: reset: %w", err)
	}
	return Stock{SKU: sku, Initial: quantity, Available: quantity}, nil
}
