package order

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

// DefaultEventGapWait is how long the relay waits for a missing event id
// before it takes it for a rolled-back transaction's and passes it: more
// than the longest an order transaction stays open, SHOP_REQUEST_TIMEOUT's
// 10s for a request, a minute for a batch with no deadline.
const DefaultEventGapWait = 2 * time.Minute

// eventCursor is one row of event_cursors.
type eventCursor struct {
	Stream string `gorm:"primaryKey"`
	LastID int64
}

func (eventCursor) TableName() string { return "event_cursors" }

// cursor returns stream's cursor, setting it on the stream's first run:
// where the relay of another stream got, when the stream was renamed;
// else before the first event that the relay of the previous release,
// which marked each event in published_at, had left unpublished, or after
// the last event when it had published them all.
func (s *Service) cursor(ctx context.Context, stream string) (int64, error) {
	var c eventCursor
	err := s.db.WithContext(ctx).Where("stream = ?", stream).Take(&c).Error
	if err == nil {
		return c.LastID, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, err
	}
	var start struct{ Renamed, Unpublished, Last *int64 }
	err = s.db.WithContext(ctx).Raw(`SELECT (SELECT MAX(last_id) FROM event_cursors) AS renamed,
		(SELECT MIN(id) - 1 FROM order_events WHERE published_at IS NULL) AS unpublished,
		(SELECT MAX(id) FROM order_events) AS last`).Scan(&start).Error
	if err != nil {
		return 0, err
	}
	for _, v := range []*int64{start.Renamed, start.Unpublished, start.Last} {
		if v != nil {
			c.LastID = *v
			break
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

// published is a subquery of the last event id published to every stream.
// Only events up to it are deleted with their orders: the relay takes a
// missing id past its cursor for an open transaction's, and waits for it.
func published(tx *gorm.DB) *gorm.DB {
	return tx.Session(&gorm.Session{NewDB: true}).Model(&eventCursor{}).Select("COALESCE(MIN(last_id), 0)")
}

// advance moves stream's cursor to last; never back, should two relays
// overlap.
func (s *Service) advance(ctx context.Context, stream string, last int64) error {
	err := s.db.WithContext(ctx).Model(&eventCursor{}).Where("stream = ? AND last_id < ?", stream, last).
		Update("last_id", last).Error
	if err != nil {
		return fmt.Errorf("order: relay: advance the cursor: %w", err)
	}
	return nil
}

// gaps remembers when the relay first saw each missing event id past its
// cursor: the first of each run of missing ids.
type gaps struct {
	mu    sync.Mutex
	wait  time.Duration
	since map[int64]time.Time
}

func newGaps(wait time.Duration) *gaps {
	if wait <= 0 {
		wait = DefaultEventGapWait
	}
	return &gaps{wait: wait, since: map[int64]time.Time{}}
}

// ready returns how many of batch, the events past cursor in id order,
// the relay may publish now: up to the first gap that has not stayed open
// for the wait. It notes the gaps it sees first, and forgets those at or
// below cursor.
func (g *gaps) ready(cursor int64, batch []event, now time.Time) int {
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
				seen = now
				g.since[next] = now
			}
			if now.Sub(seen) < g.wait && n == len(batch) {
				n = i
			}
		}
		next = e.ID + 1
	}
	return n
}
