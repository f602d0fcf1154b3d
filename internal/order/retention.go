package order

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/metrics"
)

// purgeBatch bounds the rows one DELETE of PurgeEvents takes, so that it
// holds its row locks briefly while orders commit beside it.
const purgeBatch = 500

// PurgeEvents forgets the events published before cutoff: it trims the
// stream of the entries added before it (XTRIM MINID: an entry's id is the
// time it was added), then deletes their rows, purgeBatch at a time. A row
// not yet published is never deleted, however old. It returns how many
// rows it deleted, and sets the stream-length metric.
func (s *Service) PurgeEvents(ctx context.Context, rdb redis.UniversalClient, stream string, cutoff time.Time) (int, error) {
	minID := strconv.FormatInt(cutoff.UnixMilli(), 10) + "-0"
	if err := rdb.XTrimMinID(ctx, stream, minID).Err(); err != nil {
		return 0, fmt.Errorf("order: purge events: trim the stream: %w", err)
	}
	n, err := rdb.XLen(ctx, stream).Result()
	if err != nil {
		return 0, fmt.Errorf("order: purge events: %w", err)
	}
	metrics.EventsStreamLength.Set(float64(n))
	purged := 0
	for {
		var ids []int64
		err := s.db.WithContext(ctx).Model(&event{}).Where("published_at < ?", cutoff.UTC()).
			Order("published_at").Limit(purgeBatch).Pluck("id", &ids).Error
		if err != nil {
			return purged, fmt.Errorf("order: purge events: %w", err)
		}
		if len(ids) == 0 {
			return purged, nil
		}
		res := s.db.WithContext(ctx).Where("id IN ? AND published_at IS NOT NULL", ids).Delete(&event{})
		if res.Error != nil {
			return purged, fmt.Errorf("order: purge events: %w", res.Error)
		}
		purged += int(res.RowsAffected)
		metrics.EventsPurged.Add(float64(res.RowsAffected))
	}
}
