// Package order places orders: each one takes stock through the configured
// guard and inserts its order row in the same transaction, so an order
// exists exactly when its stock was taken. With a payment window an order
// is placed pending, and then becomes paid or cancelled, each by one
// conditional transition on its row (see docs/orders.md).
package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// Errors of the service. Callers test them with errors.Is.
var (
	ErrNotFound        = errors.New("order: not found")
	ErrAlreadyRefunded = errors.New("order: already refunded")
	ErrLimitReached    = errors.New("order: per-user limit reached")
	// ErrOrderExpired means the order was cancelled, or its payment
	// deadline has passed by the database's clock.
	ErrOrderExpired = errors.New("order: expired or cancelled")
	// ErrAlreadyPaid means the order is paid (or final, with no payment
	// window): another payment paid it, or it cannot be cancelled.
	ErrAlreadyPaid = errors.New("order: already paid")
	// ErrNotPaid means a pending order was asked to be refunded: it is
	// cancelled instead.
	ErrNotPaid = errors.New("order: not paid yet; cancel it instead")
)

// Status of an order. Created, pending and paid orders hold their stock;
// refunded and cancelled ones have given it back.
const (
	StatusCreated   = "created" // final when placed: no payment window
	StatusPending   = "pending" // placed, to be paid before its deadline
	StatusPaid      = "paid"
	StatusCancelled = "cancelled" // by its buyer, or past its deadline
	StatusRefunded  = "refunded"
)

// live are the statuses of orders that hold their stock.
var live = []string{StatusCreated, StatusPending, StatusPaid}

// Order is one row of orders, and, as JSON, an order as the API and the
// order events show it.
type Order struct {
	ID             int64      `json:"id"`
	SKU            string     `gorm:"column:sku" json:"sku,omitempty"` // a cart's: its first line's, and not shown
	UserID         string     `json:"user_id"`
	Quantity       int        `json:"quantity,omitempty"`
	Status         string     `json:"status"`
	IdempotencyKey *string    `json:"-"`
	CreatedAt      time.Time  `json:"created_at"`
	ExpiresAt      *time.Time `json:"expires_at,omitempty"` // the payment deadline, by the database's clock
	PaidAt         *time.Time `json:"paid_at,omitempty"`
	PaymentID      *string    `json:"payment_id,omitempty"`
	CancelledAt    *time.Time `json:"cancelled_at,omitempty"`
	CancelKey      *string    `json:"-"`
	RefundedAt     *time.Time `json:"refunded_at,omitempty"`
	RefundKey      *string    `json:"-"`
	// LineCount is how many lines the order has; the rows of a cart's
	// other lines point to it with CartID (cart.go).
	LineCount int    `json:"-"`
	CartID    *int64 `json:"-"`
	Items     []Line `gorm:"-" json:"items"` // a cart's lines, by SKU; nil for one line
}

// Options tune a Service; nil is valid.
type Options struct {
	// Keys, when set, has the service keep its buyers' Idempotency-Keys
	// for orders (StoresKeys, keys.go).
	Keys *KeyOptions
	// SoldOutLease is the length of the leases the service takes to
	// answer sold out (soldout.go) and, under a per-user limit,
	// limit-reached (limitlease.go) from memory, on MySQL, where its
	// buyers' keys are kept; 0 takes none.
	SoldOutLease time.Duration
}

// Service places, refunds and reads orders.
type Service struct {
	db *gorm.DB
	// strategy is what it places through: every step filled in at wiring
	// (complete), by the strategy or by the service, under its one Rules.
	strategy Placement
	reads    *FirstReads
	keys     *keys     // nil: the caller keeps them
	leases   []*leases // of each kind it takes; none: every buyer asks the strategy
}

// NewService returns a Service that places orders through p, which the
// strategy's registry entry builds (Guarded for a guard alone).
func NewService(gdb *gorm.DB, p Placement, opts *Options) *Service {
	s := &Service{db: gdb, reads: NewFirstReads(gdb)}
	if opts != nil && opts.Keys != nil {
		s.keys = newKeys(opts.Keys)
	}
	if opts != nil && opts.SoldOutLease > 0 && !db.IsSQLite(gdb) {
		keep := p.KeepFirst
		if !p.StoresKeys && s.keys != nil {
			keep = s.keys.keepFirst
		}
		if keep != nil {
			s.leases = append(s.leases, newLeases(soldOutKind{}, gdb, opts.SoldOutLease, keep))
		}
		if keep != nil && p.Rules.Limit > 0 {
			s.leases = append(s.leases, newLeases(limitKind{p.Rules.Limit}, gdb, opts.SoldOutLease, keep))
		}
	}
	s.strategy = s.complete(p)
	return s
}

// placedAs sets o's status, and with a payment window its deadline, from
// the database's clock, in the transaction tx that inserts it.
func (r Rules) placedAs(tx *gorm.DB, o *Order) error {
	o.Status = StatusCreated
	if r.Window <= 0 {
		return nil
	}
	now, err := db.Now(tx)
	if err != nil {
		return err
	}
	deadline := now.Add(r.Window)
	o.Status, o.ExpiresAt = StatusPending, &deadline
	return nil
}

// PlaceRequest is a validated order request: of one SKU, or a cart.
type PlaceRequest struct {
	SKU      string
	UserID   string
	Quantity int
	// Items are a cart's lines, of distinct SKUs, in place of SKU and
	// Quantity. A cart is placed all or nothing (cart.go).
	Items          []Line
	IdempotencyKey string // optional
}

// Place takes the stock and creates the order in one transaction. When the
// user already has an order under the same idempotency key, that order is
// returned with replayed set, and no stock is taken.
func (s *Service) Place(ctx context.Context, r PlaceRequest) (o Order, replayed bool, err error) {
	if r, err = r.normal(); err != nil {
		return Order{}, false, err
	}
	// The request, not the strategy, picks the step: an order without a
	// key takes one transaction through the guard; one with a key goes to
	// the placement's placer, or to its cart placer.
	switch {
	case r.IdempotencyKey == "":
		o, replayed, err = s.place(ctx, r)
	case r.isCart():
		o, replayed, err = s.strategy.Carts.PlaceCart(ctx, r)
	default:
		o, replayed, err = s.strategy.Placer.Place(ctx, r)
	}
	if err == nil && !replayed {
		metrics.OrderLines.Observe(float64(max(1, len(r.Items))))
	}
	if replayed && err == nil {
		o = o.asPlaced()
	}
	return o, replayed, err
}

// asPlaced is o as its buyer was first answered, whatever became of it
// since: a replay gives the first response again, as the API promises,
// even when the order has been paid, cancelled or refunded meanwhile.
func (o Order) asPlaced() Order {
	o.Status = StatusCreated
	if o.ExpiresAt != nil {
		o.Status = StatusPending
	}
	o.PaidAt, o.PaymentID, o.CancelledAt, o.CancelKey, o.RefundedAt, o.RefundKey = nil, nil, nil, nil, nil, nil
	return o
}

// place places r through the service's guard, in one transaction.
func (s *Service) place(ctx context.Context, r PlaceRequest) (Order, bool, error) {
	o := newOrder(r)
	err := s.strategy.Guard.AdjustLines(ctx, stockLines(r.lines(), -1), s.insert(r, &o))
	return s.placed(ctx, r, o, err)
}

// errAnswered ends a purchase that its first read answered.
var errAnswered = errors.New("order: answered by the first read")

// placeAfter is the service's placer of orders with a key under a guard
// that lets a purchase make its first read itself: the read finds the
// key's order, or its refusal, with the stock (stock.Queued).
func (s *Service) placeAfter(f FirstReader) placeFunc {
	return func(ctx context.Context, r PlaceRequest) (Order, bool, error) {
		o := newOrder(r)
		var first Answer // the first read's answer, if it ended the purchase
		answered := false
		err := f.AdjustAfter(ctx, r.SKU, -r.Quantity, func(ctx context.Context) error {
			first.Order, first.Replayed, first.Err = s.reads.First(ctx, r)
			if answered = first.Replayed || first.Err != nil; answered {
				return errAnswered
			}
			return nil
		}, s.insert(r, &o))
		if answered {
			return first.Order, first.Replayed, first.Err
		}
		return s.placed(ctx, r, o, err)
	}
}

// insert is the transaction of r's purchase, once its stock is taken: it
// adds to what the buyer holds, and inserts o, placed, with its event.
func (s *Service) insert(r PlaceRequest, o *Order) stock.Fn {
	lines := r.lines()
	return func(st stock.Tx) error {
		tx := st.Rows()
		if err := s.holdLines(tx, r.UserID, lines); err != nil {
			return err
		}
		if err := s.strategy.Rules.placedAs(tx, o); err != nil {
			return err
		}
		if err := o.insert(tx); err != nil {
			return err
		}
		return record(tx, EventPlaced, *o)
	}
}

// placed answers r once its purchase, which would have placed o, ended
// with err: a duplicate key replays the key's order, and a refusal may be
// because the key's own order, placed meanwhile, took the stock.
func (s *Service) placed(ctx context.Context, r PlaceRequest, o Order, err error) (Order, bool, error) {
	if db.IsDuplicate(err) {
		return s.replay(ctx, r)
	}
	if err != nil {
		if r.isCart() {
			return s.checkCartRefusal(ctx, r, AsRefusal(err))
		}
		if !isRefusal(err) {
			err = fmt.Errorf("order: place: %w", err)
		}
		return s.reads.CheckRefusal(ctx, r, Order{}, false, err)
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
	limit := s.strategy.Rules.Limit
	if limit <= 0 {
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
	if held > limit {
		return LimitReached(userID, sku, held-units, limit)
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
	q := s.db.WithContext(ctx).Where("user_id = ? AND id > ? AND cart_id IS NULL", r.UserID, r.After)
	if r.SKU != "" {
		q = q.Where("(sku = ? OR id IN (?))", r.SKU, s.db.Model(&Order{}).Select("cart_id").Where("user_id = ? AND sku = ? AND cart_id IS NOT NULL", r.UserID, r.SKU))
	}
	var orders []Order
	if err := q.Order("id").Limit(r.Limit).Find(&orders).Error; err != nil {
		return nil, fmt.Errorf("order: list: %w", err)
	}
	return orders, withItems(ctx, s.db, orders)
}

// Get reads one order. A cart's line other than its first is not an
// order of its own: it is not found.
func (s *Service) Get(ctx context.Context, id int64) (Order, error) {
	return take(ctx, s.db, s.db.WithContext(ctx).Where("id = ? AND cart_id IS NULL", id), id)
}

// Owned reads one order of userID: another user's order is not found, as
// one that does not exist.
func (s *Service) Owned(ctx context.Context, id int64, userID string) (Order, error) {
	return take(ctx, s.db, s.db.WithContext(ctx).Where("id = ? AND user_id = ? AND cart_id IS NULL", id, userID), id)
}

func take(ctx context.Context, gdb, q *gorm.DB, id int64) (Order, error) {
	o := []Order{{}}
	err := q.Take(&o[0]).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return Order{}, fmt.Errorf("order: get: %w", err)
	}
	return o[0], withItems(ctx, gdb, o)
}
