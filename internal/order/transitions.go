package order

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/stock"
)

// The transitions that give an order's stock back: a refund (created or
// paid to refunded), a cancellation by its buyer and an expiry (pending to
// cancelled). Each is one conditional UPDATE on the order row, in the
// transaction that returns the stock through the strategy, so that of any
// number of concurrent transitions of one order exactly one goes through,
// and the stock returns once.

// transition is one kind of giveBack.
type transition struct {
	from  []string // the statuses it moves an order from
	to    string   // refunded or cancelled
	key   string   // the request's Idempotency-Key, kept on the order
	event string
	// due: only once the order's deadline has passed by the database's
	// clock (an expiry).
	due bool
	// fence, if set, is the fence of the job run that makes it: a run that
	// a later one overtook writes nothing.
	fence *jobFence
}

// errMoved means the order was no longer in a status the transition moves
// it from, or not due, when its transaction ran: another transition won.
var errMoved = errors.New("order: moved on")

// giveBack makes t on o, returning its units through the strategy and
// taking them off what its user holds, and returns the order after it.
func (s *Service) giveBack(ctx context.Context, o Order, t transition) (Order, error) {
	if o.LineCount > 1 && len(o.Items) == 0 {
		orders := []Order{o}
		if err := withItems(ctx, s.db, orders); err != nil {
			return Order{}, err
		}
		o = orders[0]
	}
	after := o
	err := s.strategy.Refunder.Refund(ctx, o, func(st stock.Tx) error {
		tx := st.Rows()
		if t.fence != nil {
			if err := t.fence.claim(tx); err != nil {
				return err
			}
		}
		now, err := db.Now(tx)
		if err != nil {
			return err
		}
		after = o
		after.Status = t.to
		at, key := after.moved(t.to)
		*at, *key = &now, nullable(t.key)
		moved, err := move(tx, o, func(q *gorm.DB) *gorm.DB {
			q = q.Where("status IN ?", t.from)
			if t.due {
				q = q.Where("expires_at <= ?", now)
			}
			return q
		}, map[string]any{"status": t.to, t.to + "_at": now, keyColumn(t.to): *key})
		switch {
		case err != nil:
			return err
		case !moved:
			return errMoved
		}
		if err := s.release(tx, o); err != nil {
			return err
		}
		return record(tx, t.event, after)
	})
	return after, err
}

// release takes o's units off what its user holds, each line once its
// limit leases have ended (unhold).
func (s *Service) release(tx *gorm.DB, o Order) error {
	if s.strategy.Rules.Limit <= 0 {
		return nil
	}
	for _, l := range o.lines() {
		if err := unhold(tx, o.UserID, l.SKU, l.Quantity); err != nil {
			return err
		}
	}
	return nil
}

// Refund returns a created or paid order's stock and marks it refunded. A
// user who does not own the order is told it does not exist. A refund
// already made under the same idempotency key is returned with replayed
// set.
func (s *Service) Refund(ctx context.Context, id int64, userID, key string) (Order, bool, error) {
	return s.byBuyer(ctx, id, userID, transition{from: []string{StatusCreated, StatusPaid}, to: StatusRefunded, key: key, event: EventRefunded})
}

// Cancel cancels its buyer's pending order and returns its stock. A
// cancellation already made under the same idempotency key is returned
// with replayed set.
func (s *Service) Cancel(ctx context.Context, id int64, userID, key string) (Order, bool, error) {
	return s.byBuyer(ctx, id, userID, transition{from: []string{StatusPending}, to: StatusCancelled, key: key, event: EventCancelled})
}

// byBuyer makes t on the buyer's order id, or answers why it cannot.
func (s *Service) byBuyer(ctx context.Context, id int64, userID string, t transition) (Order, bool, error) {
	o, err := s.Owned(ctx, id, userID)
	if err != nil {
		return Order{}, false, err
	}
	if slices.Contains(t.from, o.Status) {
		after, err := s.giveBack(ctx, o, t)
		if err == nil {
			return after, false, nil
		}
		if !errors.Is(err, errMoved) {
			return Order{}, false, fmt.Errorf("order: %s: %w", t.to, err)
		}
		if o, err = s.Get(ctx, id); err != nil {
			return Order{}, false, err
		}
	}
	if _, k := o.moved(t.to); t.key != "" && *k != nil && **k == t.key {
		return o, true, nil
	}
	return Order{}, false, fmt.Errorf("%w: order %d is %s", whyNot(o.Status, t.to), id, o.Status)
}

// moved returns o's fields that a move to status to sets: when (the
// column to_at), and under which Idempotency-Key (keyColumn).
func (o *Order) moved(to string) (at **time.Time, key **string) {
	if to == StatusRefunded {
		return &o.RefundedAt, &o.RefundKey
	}
	return &o.CancelledAt, &o.CancelKey
}

func keyColumn(to string) string {
	if to == StatusRefunded {
		return "refund_key"
	}
	return "cancel_key"
}

// whyNot is why an order in status cannot move to to.
func whyNot(status, to string) error {
	switch {
	case status == StatusRefunded:
		return ErrAlreadyRefunded
	case status == StatusCancelled:
		return ErrOrderExpired
	case status == StatusPending:
		return ErrNotPaid
	case to == StatusCancelled: // created or paid
		return ErrAlreadyPaid
	}
	return fmt.Errorf("order: cannot go from %s to %s", status, to)
}
