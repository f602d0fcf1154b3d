package outbox

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/metrics"
)

// purgeBatch bounds the rows one DELETE of Purge takes, so that it
// holds its row locks briefly while orders commit beside it.
const purgeBatch = 500

// Purge forgets the events published before cutoff: it trims the
// stream of the entries added before it (XTRIM MINID: an entry's id is the
// time it was added), then deletes the rows made before it at or below
// stream's cursor, purgeBatch at a time, in id order. A row past the
// cursor, not yet published, is never deleted, however old. It returns
// how many rows it deleted, and sets the stream-length metric.
func (s *Outbox) Purge(ctx context.Context, rdb redis.UniversalClient, stream string, cutoff time.Time) (int, error) {
	minID := strconv.FormatInt(cutoff.UnixMilli(), 10) + "-0"
	if err := rdb.XTrimMinID(ctx, stream, minID).Err(); err != nil {
		return 0, fmt.Errorf("outbox: purge events: trim the stream: %w", err)
	}
	n, err := rdb.XLen(ctx, stream).Result()
	if err != nil {
		return 0, fmt.Errorf("outbox: purge events: %w", err)
	}
	metrics.EventsStreamLength.Set(float64(n))
	cursor, err := s.cursor(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("outbox: purge events: read the cursor: %w", err)
	}
	purged := 0
	for {
		deleted, more, err := s.purgeOldest(ctx, cursor, cutoff)
		purged += deleted
		metrics.EventsPurged.Add(float64(deleted))
		if err != nil || !more {
			return purged, err
		}
	}
}

// purgeOldest deletes the oldest events, up to purgeBatch, at or below
// cursor and made before cutoff, stopping at the first one made after it:
// ids follow the time events are made, but for the moments between taking
// the time and the id, so a row left behind goes in a later run. It tells
// whether there may be more.
func (s *Outbox) purgeOldest(ctx context.Context, cursor int64, cutoff time.Time) (int, bool, error) {
	var rows []struct {
		ID        int64
		CreatedAt time.Time
	}
	err := s.db.WithContext(ctx).Model(&event{}).Select("id", "created_at").Where("id <= ?", cursor).
		Order("id").Limit(purgeBatch).Find(&rows).Error
	if err != nil {
		return 0, false, fmt.Errorf("outbox: purge events: %w", err)
	}
	old := 0
	for old < len(rows) && rows[old].CreatedAt.Before(cutoff) {
		old++
	}
	if old == 0 {
		return 0, false, nil
	}
	res := s.db.WithContext(ctx).Where("id BETWEEN ? AND ? AND id <= ?", rows[0].ID, rows[old-1].ID, cursor).Delete(&event{})
	if res.Error != nil {
		return 0, false, fmt.Errorf("outbox: purge events: %w", res.Error)
	}
	return int(res.RowsAffected), old == purgeBatch, nil
}
