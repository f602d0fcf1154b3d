package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/stockguard/shop/internal/backoff"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/stock"
)

// Payments come from the payment provider's callback, under the provider's
// payment id, which is their idempotency key. A payment pays a pending
// order whose deadline has not passed by the database's clock, in one
// conditional transition; one that cannot is kept as orphaned, so that the
// money can go back. Nothing a provider sends is lost.

// Payment statuses.
const (
	PaymentPaid     = "paid"
	PaymentOrphaned = "orphaned"
)

// payment is one row of payments.
type payment struct {
	PaymentID string `gorm:"primaryKey"`
	OrderID   int64
	Status    string
	Reason    *string // orphaned: why, as the problem type it was answered
	CreatedAt time.Time
}

// Why a payment was orphaned.
const (
	reasonExpired     = "order-expired"
	reasonAlreadyPaid = "already-paid"
)

// Pay pays order id with the payment paymentID, and returns the paid
// order. It answers ErrOrderExpired if the order is cancelled or past its
// deadline, ErrAlreadyPaid if another payment paid it (or it is final),
// and ErrNotFound for an unknown order. A payment id seen before gets the
// same answer, with replayed set; one seen for another order,
// idempotency.ErrKeyReused.
func (s *Service) Pay(ctx context.Context, id int64, paymentID string) (o Order, replayed bool, err error) {
	for attempt := 0; ; attempt++ {
		var p payment
		err := s.db.WithContext(ctx).Where("payment_id = ?", paymentID).Take(&p).Error
		switch {
		case err == nil:
			return s.answer(ctx, p, id)
		case !errors.Is(err, gorm.ErrRecordNotFound):
			return Order{}, false, fmt.Errorf("order: pay: %w", err)
		}
		o, replayed, err := s.pay(ctx, id, paymentID)
		if !db.IsDuplicate(err) || attempt > 0 {
			return o, replayed, err
		}
		// A callback with the same payment id was first: answer as it did.
	}
}

// pay makes the payment, or keeps it as orphaned, in one transaction. It
// reports replayed when a callback with the same payment id paid the order
// meanwhile.
func (s *Service) pay(ctx context.Context, id int64, paymentID string) (o Order, replayed bool, err error) {
	for attempt := 0; ; attempt++ {
		o, replayed, err = s.payOnce(ctx, id, paymentID)
		// A deadlock with a transition of a neighbouring order (their
		// rows' entries in the status index lie side by side) rolled it
		// back: it runs again, as every stock transaction does.
		if !db.IsRetryable(err) {
			return o, replayed, err
		}
		if backoff.Wait(ctx, attempt) != nil {
			return Order{}, false, fmt.Errorf("order: pay: %w: %w", stock.ErrBusy, err)
		}
	}
}

func (s *Service) payOnce(ctx context.Context, id int64, paymentID string) (o Order, replayed bool, err error) {
	var answer error
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now, err := db.Now(tx)
		if err != nil {
			return err
		}
		// Locked here: no transition of it commits until this one does.
		if err := tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Where("id = ? AND cart_id IS NULL", id).Take(&o).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				answer = fmt.Errorf("%w: %d", ErrNotFound, id)
				return nil
			}
			return err
		}
		paid, err := move(tx, o, func(q *gorm.DB) *gorm.DB {
			return q.Where("status = ? AND expires_at > ?", StatusPending, now)
		}, map[string]any{"status": StatusPaid, "paid_at": now, "payment_id": paymentID})
		if err != nil {
			return err
		}
		orders := []Order{o}
		if err := withItems(ctx, tx, orders); err != nil {
			return err
		}
		o = orders[0]
		p := payment{PaymentID: paymentID, OrderID: id, Status: PaymentPaid, CreatedAt: now}
		if paid {
			o.Status, o.PaidAt, o.PaymentID = StatusPaid, &now, &paymentID
			if err := tx.Create(&p).Error; err != nil {
				return err
			}
			return record(tx, EventPaid, o)
		}
		if o.PaymentID != nil && *o.PaymentID == paymentID {
			replayed = true // this payment paid it, in a callback that committed meanwhile
			return nil
		}
		reason := reasonAlreadyPaid
		if o.Status == StatusCancelled || o.Status == StatusPending {
			reason = reasonExpired
		}
		p.Status, p.Reason = PaymentOrphaned, &reason
		answer = paymentRefusal(reason, id)
		return tx.Create(&p).Error
	})
	if err != nil {
		return Order{}, false, fmt.Errorf("order: pay: %w", err)
	}
	if answer != nil {
		return Order{}, false, answer
	}
	return o, replayed, nil
}

// answer is the answer that payment p was given, for a callback of order
// id: its order, or the refusal it was kept as orphaned for.
func (s *Service) answer(ctx context.Context, p payment, id int64) (Order, bool, error) {
	if p.OrderID != id {
		return Order{}, false, fmt.Errorf("order: pay: %w: payment %s is for order %d", idempotency.ErrKeyReused, p.PaymentID, p.OrderID)
	}
	if p.Status == PaymentOrphaned && p.Reason != nil {
		return Order{}, true, paymentRefusal(*p.Reason, id)
	}
	o, err := s.Get(ctx, id)
	return o, err == nil, err
}

func paymentRefusal(reason string, id int64) error {
	if reason == reasonExpired {
		return fmt.Errorf("%w: order %d", ErrOrderExpired, id)
	}
	return fmt.Errorf("%w: order %d", ErrAlreadyPaid, id)
}
