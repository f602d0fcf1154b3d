package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The relay's cursor: per stream, the id of the last event published, in
// event_cursors. Every event at or below it is published; Relay reads on
// from it in id order and moves it once a batch.
//
// Ids are taken when a transaction inserts its event, not when it
// commits: an event may commit, and be read, while a smaller id is still
// in an open transaction, and a transaction that rolls back leaves its ids
// unused for good. So the cursor never passes a missing id, a gap, until
// the gap has stayed open for the gap wait: its id was taken before the
// event after it, which had committed when the relay first saw the gap,
// so a transaction that still held it would have been open for longer
// than the wait, and no order transaction is (SHOP_RELAY_GAP_WAIT).

// DefaultGapWait is how long the relay waits for a missing event id
// before it takes it for a rolled-back transaction's and passes it: more
// than the longest an order transaction stays open, SHOP_REQUEST_TIMEOUT's
// 10s for a request, a minute for a batch with no deadline.
const DefaultGapWait = 2 * time.Minute

// eventCursor is one row of event_cursors.
type eventCursor struct {
	Stream string `gorm:"primaryKey"`
	LastID int64
}

func (eventCursor) TableName() string { return "event_cursors" }

// cursor returns stream's cursor, setting it on the stream's first run:
// where the relay of another stream got, when the stream was renamed; else
// before the first event that the relay of the previous release, which
// marked each event in published_at, left unpublished, and before every
// event it published within the gap wait: a transaction open now took its
// id after those were published, so the cursor starts below it.
func (s *Outbox) cursor(ctx context.Context, stream string) (int64, error) {
	var c eventCursor
	err := s.db.WithContext(ctx).Where("stream = ?", stream).Take(&c).Error
	if err == nil {
		return c.LastID, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, err
	}
	var start struct{ Renamed, Unpublished, Settled *int64 }
	err = s.db.WithContext(ctx).Raw(`SELECT (SELECT MAX(last_id) FROM event_cursors) AS renamed,
		(SELECT MIN(id) - 1 FROM order_events WHERE published_at IS NULL) AS unpublished,
		(SELECT MAX(id) FROM order_events WHERE published_at < ?) AS settled`, time.Now().UTC().Add(-s.gaps.wait)).Scan(&start).Error
	if err != nil {
		return 0, err
	}
	switch {
	case start.Renamed != nil:
		c.LastID = *start.Renamed
	case start.Settled != nil:
		c.LastID = *start.Settled
		if start.Unpublished != nil {
			c.LastID = min(c.LastID, *start.Unpublished)
		}
	}
	c.Stream = stream
	// Two relays that overlap both set it: the first one's stays.
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&c).Error; err != nil {
		return 0, err
	}
	err = s.db.WithContext(ctx).Where("stream = ?", stream).Take(&c).Error
	return c.LastID, err
}

// DeletePublished deletes in tx the events of orders, a subquery of their
// ids, up to the last event id published to every stream. Only those are
// deleted with their orders: the relay takes a missing id past its cursor
// for an open transaction's, and waits for it. A stream no longer relayed
// to holds it back; retention deletes, by each stream's own cursor, what
// it leaves.
func DeletePublished(tx *gorm.DB, orders *gorm.DB) error {
	published := tx.Session(&gorm.Session{NewDB: true}).Model(&eventCursor{}).Select("COALESCE(MIN(last_id), 0)")
	return tx.Where("order_id IN (?) AND id <= (?)", orders, published).Delete(&event{}).Error
}

// advance moves stream's cursor to last; never back, should two relays
// overlap.
func (s *Outbox) advance(ctx context.Context, stream string, last int64) error {
	err := s.db.WithContext(ctx).Model(&eventCursor{}).Where("stream = ? AND last_id < ?", stream, last).
		Update("last_id", last).Error
	if err != nil {
		return fmt.Errorf("outbox: relay: advance the cursor: %w", err)
	}
	return nil
}

// gaps remembers when the relay first saw each missing event id past its
// cursor: the first of each run of missing ids. A gap passes once no
// transaction that could fill it is open: one that took its id started
// before the read that first saw it. So the relay looks, before it reads,
// at how long it has waited (SHOP_RELAY_GAP_WAIT, which no order
// transaction outlasts) and, on MySQL, at when the oldest open
// transaction started; a transaction ended by then, if it committed, has
// its event in the read that follows.
type gaps struct {
	mu    sync.Mutex
	wait  time.Duration
	since map[int64]sighting
	// look, on MySQL, returns the database's clock and when the oldest
	// transaction open now started (to the second), or the clock if none
	// is. Nil on SQLite, whose one writer leaves no gap open.
	look func(ctx context.Context) (now, oldest time.Time, err error)
	// clock, on MySQL, is the database's clock, as look reads it.
	clock func(ctx context.Context) (time.Time, error)
}

// sighting is when the relay first saw a gap, or looked before a read, by
// its own clock and, on MySQL, by the database's (zero if unknown).
type sighting struct{ at, db time.Time }

func newGaps(gdb *gorm.DB, wait time.Duration) *gaps {
	if wait <= 0 {
		wait = DefaultGapWait
	}
	g := &gaps{wait: wait, since: map[int64]sighting{}}
	if gdb.Dialector.Name() == "mysql" {
		g.look = func(ctx context.Context) (now, oldest time.Time, err error) {
			var started *time.Time
			err = gdb.WithContext(ctx).Raw(`SELECT NOW(6), MIN(trx_started) FROM information_schema.INNODB_TRX`).Row().Scan(&now, &started)
			if started != nil {
				return now, *started, err
			}
			return now, now, err
		}
		g.clock = func(ctx context.Context) (now time.Time, err error) {
			err = gdb.WithContext(ctx).Raw(`SELECT NOW(6)`).Row().Scan(&now)
			return now, err
		}
	}
	return g
}

// before looks, before a read, at the time and, when gaps are pending on
// MySQL, at when the oldest open transaction started (db; zero if it
// cannot tell: without the PROCESS privilege, the relay only waits).
func (g *gaps) before(ctx context.Context) sighting {
	g.mu.Lock()
	pending := len(g.since) > 0
	g.mu.Unlock()
	b := sighting{at: time.Now()}
	if g.look != nil && pending {
		if _, oldest, err := g.look(ctx); err == nil {
			b.db = oldest
		}
	}
	return b
}

// ready returns how many of batch, the events past cursor in id order read
// after b, the relay may publish now: up to the first gap that may still
// be filled. It notes the gaps it sees first, and forgets those at or
// below cursor.
func (g *gaps) ready(ctx context.Context, cursor int64, batch []event, b sighting) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id := range g.since {
		if id <= cursor {
			delete(g.since, id)
		}
	}
	n, next := len(batch), cursor+1
	for i, e := range batch {
		if e.ID != next {
			seen, ok := g.since[next]
			if !ok {
				seen = sighting{at: time.Now(), db: g.dbNow(ctx)}
				g.since[next] = seen
			}
			if n == len(batch) && !g.passed(seen, b) {
				n = i
			}
		}
		next = e.ID + 1
	}
	return n
}

// passed tells whether a gap seen then can no longer be filled, judging by
// b, taken before the read that still misses it: it had waited for the
// wait by then, or every transaction open then started after it was seen.
func (g *gaps) passed(seen, b sighting) bool {
	if b.at.Sub(seen.at) >= g.wait {
		return true
	}
	return !seen.db.IsZero() && !b.db.IsZero() && b.db.After(seen.db)
}

// dbNow is the database's clock, or zero on SQLite or should it fail.
func (g *gaps) dbNow(ctx context.Context) time.Time {
	if g.clock == nil {
		return time.Time{}
	}
	t, err := g.clock(ctx)
	if err != nil {
		return time.Time{}
	}
	return t
}
