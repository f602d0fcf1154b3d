package order

import (
	"context"
	"errors"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/background"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// Sold-out answers from memory. In a flash sale nearly every buyer is
// refused, and asking the strategy each time costs a refusal what an
// order costs. Once the strategy has refused a buyer of a SKU as sold
// out, the instance takes a sold-out lease on the SKU's row
// (stock.GrantSoldOut): the database's promise that no unit comes back
// until the lease ends, since every give-back waits for it. In the same
// transaction it reads the keys of the orders that hold the SKU's units.
// Until a little before the lease ends, a buyer of the SKU whose key has
// none of those orders is told sold out here, with one Redis command that
// keeps the refusal under the key, unless the key has an answer already,
// which is replayed instead (KeepFirst). A winner's retry goes to the
// strategy, which replays its order. The lease is taken again while
// buyers keep coming. See docs/strategies.md#sold-out-leases.

// DefaultSoldOutLease is how long a sold-out lease lasts unless the
// configuration says otherwise (SHOP_SOLD_OUT_LEASE): what a give-back
// waits at most.
const DefaultSoldOutLease = 500 * time.Millisecond

// KeepFirst keeps answer as the final answer to r under its key, unless
// the key has one already: it returns that one, replayed, with found. When
// Redis cannot say, found is false and nothing is kept.
type KeepFirst func(ctx context.Context, r PlaceRequest, answer string) (a Answer, found bool)

// soldOut holds the instance's sold-out leases.
type soldOut struct {
	db   *gorm.DB
	d    time.Duration // a lease's length, from before it was asked for
	keep KeepFirst
	bg   *background.Group // the grants under way

	mu   sync.Mutex
	skus map[string]*lease
}

// lease is what the instance knows of a SKU that was sold out.
type lease struct {
	until    time.Time        // answers from memory until then (monotonic)
	winners  map[UserKey]bool // the keys of the orders with the SKU's units
	retry    time.Time        // no grant is asked before then
	granting bool
}

// margin is the part of a lease the instance does not use: its clock
// and the database's may not run at quite the same rate.
func (s *soldOut) margin() time.Duration { return s.d / 10 }

func newSoldOut(gdb *gorm.DB, d time.Duration, keep KeepFirst) *soldOut {
	return &soldOut{db: gdb, d: d, keep: keep, bg: background.New(), skus: make(map[string]*lease)}
}

// around is place, answering sold out from a lease where one holds.
func (s *soldOut) around(place placeFunc) placeFunc {
	return func(ctx context.Context, r PlaceRequest) (Order, bool, error) {
		if s.holds(r) {
			answer, _ := Stored(Answer{Err: SoldOut(r.SKU)})
			if a, found := s.keep(ctx, r, answer); found {
				return a.Order, a.Replayed, a.Err
			}
			metrics.SoldOutLeaseAnswers.Inc()
			return Order{}, false, SoldOut(r.SKU)
		}
		o, replayed, err := place(ctx, r)
		if errors.Is(err, stock.ErrSoldOut) && !replayed {
			s.learn(r.SKU)
		}
		return o, replayed, err
	}
}

// holds reports whether a lease lets r be told sold out here, and asks
// for the next one as this one nears its end.
func (s *soldOut) holds(r PlaceRequest) bool {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.skus[r.SKU]
	if l == nil || !now.Before(l.until) {
		return false
	}
	if l.until.Sub(now) < s.d/3 {
		s.grantLocked(r.SKU, l, now)
	}
	return !l.winners[UserKey{r.UserID, r.IdempotencyKey}]
}

// learn asks for a lease on sku, which the strategy has just said is sold
// out.
func (s *soldOut) learn(sku string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.skus[sku]
	if l == nil {
		l = &lease{}
		s.skus[sku] = l
	}
	if now.Before(l.until) {
		return
	}
	s.grantLocked(sku, l, now)
}

// grantLocked asks for a lease on sku in the background, unless one is
// being asked for, or was refused a moment ago. s.mu is held.
func (s *soldOut) grantLocked(sku string, l *lease, now time.Time) {
	if l.granting || now.Before(l.retry) {
		return
	}
	l.granting = true
	s.bg.Go(func(ctx context.Context) {
		until, winners, err := s.grant(ctx, sku)
		s.mu.Lock()
		defer s.mu.Unlock()
		l.granting = false
		if err != nil || winners == nil {
			// Units are left, or still held in Redis or a batch: the
			// strategy answers, and a lease is asked for again later.
			l.retry = time.Now().Add(s.d / 2)
			return
		}
		l.until, l.winners = until, winners
	})
}

// grant takes a lease on sku and reads the keys of its orders, in one
// transaction; winners is nil when sku has units available.
func (s *soldOut) grant(ctx context.Context, sku string) (until time.Time, winners map[UserKey]bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.d)
	defer cancel()
	start := time.Now()
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		granted, err := stock.GrantSoldOut(tx, sku, s.d)
		if err != nil || !granted {
			return err
		}
		// A cart's key is on its head, the order of its first line.
		rows, err := tx.Raw(`SELECT h.user_id, h.idempotency_key FROM orders o
			JOIN orders h ON h.id = COALESCE(o.cart_id, o.id)
			WHERE o.sku = ? AND h.idempotency_key IS NOT NULL`, sku).Rows()
		if err != nil {
			return err
		}
		defer rows.Close()
		winners = make(map[UserKey]bool)
		for rows.Next() {
			var k UserKey
			if err := rows.Scan(&k.User, &k.Key); err != nil {
				return err
			}
			winners[k] = true
		}
		return rows.Err()
	})
	if err != nil {
		return time.Time{}, nil, err
	}
	metrics.SoldOutLeases.Inc()
	return start.Add(s.d - s.margin()), winners, nil
}

// close ends the grants under way.
func (s *soldOut) close() { s.bg.End() }
