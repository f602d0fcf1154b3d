package order

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/background"
)

// Refusals answered from memory. In a flash sale nearly every buyer is
// refused, and asking the strategy each time costs a refusal what an
// order costs. Once the strategy has refused a buyer for a reason that a
// row of the database keeps (a leaseKind: the SKU sold out, or the buyer
// at the per-user limit), the instance takes a lease on that row
// (stock.Lease.Grant): the database's promise that the reason stays until
// the lease ends, since every change that takes it away waits for it. In
// the same transaction it reads the keys of the orders that the refusal
// does not answer. Until a little before the lease ends, a buyer that the
// lease covers, whose key has none of those orders, is refused here, with
// one Redis command that keeps the refusal under the key, unless the key
// has an answer already, which is replayed instead (KeepFirst). A
// winner's retry goes to the strategy, which replays its order. The lease
// is taken again while buyers keep coming. See
// docs/strategies.md#sold-out-leases.

// DefaultSoldOutLease is how long a lease lasts unless the configuration
// says otherwise (SHOP_SOLD_OUT_LEASE): what a give-back waits at most
// for each kind.
const DefaultSoldOutLease = 500 * time.Millisecond

// KeepFirst keeps answer as the final answer to r under its key, unless
// the key has one already: it returns that one, replayed, with found. When
// Redis cannot say, found is false and nothing is kept.
type KeepFirst func(ctx context.Context, r PlaceRequest, answer string) (a Answer, found bool)

// leaseKind is one reason for a refusal that a lease keeps.
type leaseKind interface {
	// of is the row whose lease answers r.
	of(r PlaceRequest) leaseKey
	// refuses reports whether err, the strategy's answer, is the refusal.
	refuses(err error) bool
	// grant takes a lease on k's row until d from now, in tx, and reads
	// what the lease answers with; ok is false when the row does not keep
	// the reason.
	grant(tx *gorm.DB, k leaseKey, d time.Duration) (g granted, ok bool, err error)
	// refusal is r's answer under a lease that read g.
	refusal(r PlaceRequest, g granted) error
	// counters count the leases taken, and the buyers answered under one.
	counters() (taken, answered prometheus.Counter)
}

// leaseKey names a leased row: a SKU's, or a buyer's of a SKU.
type leaseKey struct{ user, sku string }

// granted is what a grant read with its lease.
type granted struct {
	winners map[UserKey]bool // the keys of the orders it does not answer
	held    int              // a limit's: what the buyer holds
}

// leases holds the instance's leases of one kind.
type leases struct {
	kind leaseKind
	db   *gorm.DB
	d    time.Duration // a lease's length, from before it was asked for
	keep KeepFirst
	bg   *background.Group // the grants under way

	mu    sync.Mutex
	rows  map[leaseKey]*lease
	swept time.Time // when rows last lost the leases that ended
}

// lease is what the instance knows of a row that refused a buyer.
type lease struct {
	granted
	until    time.Time // answers from memory until then (monotonic)
	retry    time.Time // no grant is asked before then
	granting bool
}

// margin is the part of a lease the instance does not use: its clock
// and the database's may not run at quite the same rate.
func (s *leases) margin() time.Duration { return s.d / 10 }

func newLeases(kind leaseKind, gdb *gorm.DB, d time.Duration, keep KeepFirst) *leases {
	return &leases{kind: kind, db: gdb, d: d, keep: keep, bg: background.New(), rows: make(map[leaseKey]*lease)}
}

// around is place, refusing from a lease where one holds.
func (s *leases) around(place placeFunc) placeFunc {
	return func(ctx context.Context, r PlaceRequest) (Order, bool, error) {
		if g, ok := s.holds(r); ok {
			refusal := s.kind.refusal(r, g)
			answer, _ := Stored(Answer{Err: refusal})
			if a, found := s.keep(ctx, r, answer); found {
				return a.Order, a.Replayed, a.Err
			}
			_, answered := s.kind.counters()
			answered.Inc()
			return Order{}, false, refusal
		}
		o, replayed, err := place(ctx, r)
		if !replayed && s.kind.refuses(err) {
			s.learn(s.kind.of(r))
		}
		return o, replayed, err
	}
}

// holds returns what a lease that lets r be refused here read, and asks
// for the next one as this one nears its end.
func (s *leases) holds(r PlaceRequest) (granted, bool) {
	now := time.Now()
	k := s.kind.of(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.rows[k]
	if l == nil || !now.Before(l.until) {
		return granted{}, false
	}
	if l.until.Sub(now) < s.d/3 {
		s.grantLocked(k, l, now)
	}
	return l.granted, !l.winners[UserKey{r.UserID, r.IdempotencyKey}]
}

// learn asks for a lease on k's row, which the strategy has just said
// refuses a buyer.
func (s *leases) learn(k leaseKey) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	l := s.rows[k]
	if l == nil {
		l = &lease{}
		s.rows[k] = l
	}
	if now.Before(l.until) {
		return
	}
	s.grantLocked(k, l, now)
}

// sweepLocked forgets, once a lease's length, the rows whose leases
// ended and are not being asked for: a row per buyer who reached the
// limit would otherwise stay for the process's life. s.mu is held.
func (s *leases) sweepLocked(now time.Time) {
	if now.Sub(s.swept) < s.d {
		return
	}
	s.swept = now
	for k, l := range s.rows {
		if !l.granting && !now.Before(l.until) && !now.Before(l.retry) {
			delete(s.rows, k)
		}
	}
}

// grantLocked asks for a lease on k's row in the background, unless one
// is being asked for, or was refused a moment ago. s.mu is held.
func (s *leases) grantLocked(k leaseKey, l *lease, now time.Time) {
	if l.granting || now.Before(l.retry) {
		return
	}
	l.granting = true
	s.bg.Go(func(ctx context.Context) {
		until, g, ok := s.grant(ctx, k)
		s.mu.Lock()
		defer s.mu.Unlock()
		l.granting = false
		if !ok {
			// The row does not keep the reason, or not yet (units held
			// in Redis or a batch): the strategy answers, and a lease is
			// asked for again later.
			l.retry = time.Now().Add(s.d / 2)
			return
		}
		l.until, l.granted = until, g
	})
}

// grant takes a lease on k's row and reads what it answers with, in one
// transaction.
func (s *leases) grant(ctx context.Context, k leaseKey) (until time.Time, g granted, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, s.d)
	defer cancel()
	start := time.Now()
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		g, ok, err = s.kind.grant(tx, k, s.d)
		return err
	})
	if err != nil || !ok {
		return time.Time{}, granted{}, false
	}
	taken, _ := s.kind.counters()
	taken.Inc()
	return start.Add(s.d - s.margin()), g, true
}

// readKeys reads, in tx, the keys that query (of user_id and
// idempotency_key) selects.
func readKeys(tx *gorm.DB, query string, args ...any) (map[UserKey]bool, error) {
	rows, err := tx.Raw(query, args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keys := make(map[UserKey]bool)
	for rows.Next() {
		var k UserKey
		if err := rows.Scan(&k.User, &k.Key); err != nil {
			return nil, err
		}
		keys[k] = true
	}
	return keys, rows.Err()
}

// close ends the grants under way.
func (s *leases) close() { s.bg.End() }
