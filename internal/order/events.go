package order

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// Order events, through a transactional outbox: every transition writes
// an event row in the transaction that makes it, and Relay, a job on one
// instance at a time, publishes the rows to a Redis stream and marks them.
// Delivery is at least once, and in order per order: an order's next
// transition starts after the last one committed, so its event has a
// larger id, and Relay publishes in id order. Each event's id is unique:
// a consumer drops an id it has seen. See docs/orders.md#order-events.

// The types of event.
const (
	EventPlaced    = "placed"
	EventPaid      = "paid"
	EventCancelled = "cancelled" // by the buyer
	EventExpired   = "expired"   // by the expiry job: the order is cancelled
	EventRefunded  = "refunded"
)

// event is one row of order_events.
type event struct {
	ID          int64
	OrderID     int64
	Type        string
	Payload     string // the order after the transition, as JSON
	CreatedAt   time.Time
	PublishedAt *time.Time
}

func (event) TableName() string { return "order_events" }

// record writes the events of type kind of orders in tx, with one INSERT
// written here, as a batch's orders are (insert.go): GORM would reflect on
// every row, and a batch records hundreds.
func record(tx *gorm.DB, kind string, orders ...Order) error {
	if len(orders) == 0 {
		return nil
	}
	const insert = `INSERT INTO order_events (order_id, type, payload, created_at) VALUES `
	var q strings.Builder
	q.Grow(len(insert) + 14*len(orders))
	q.WriteString(insert)
	args := make([]any, 0, 4*len(orders))
	now := time.Now().UTC()
	for i, o := range orders {
		payload, err := json.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?)")
		args = append(args, o.ID, kind, string(payload), now)
	}
	_, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, q.String(), args...)
	return err
}

// relayBatch bounds the events one round of Relay reads and publishes.
const relayBatch = 500

// Relay publishes the events not published yet to the Redis stream, in id
// order, capping it at about Options.StreamMaxLen entries, each with its fields id, order, type and payload (the order as
// JSON), and marks them published. It returns how many it published. A
// relay that dies between the two publishes them again: consumers drop
// the ids they have seen.
func (s *Service) Relay(ctx context.Context, rdb redis.UniversalClient, stream string) (int, error) {
	n := 0
	for {
		var batch []event
		if err := s.db.WithContext(ctx).Where("published_at IS NULL").Order("id").Limit(relayBatch).Find(&batch).Error; err != nil {
			return n, fmt.Errorf("order: relay: %w", err)
		}
		if len(batch) == 0 {
			return n, nil
		}
		ids := make([]int64, len(batch))
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, e := range batch {
				ids[i] = e.ID
				p.XAdd(ctx, &redis.XAddArgs{Stream: stream, MaxLen: s.maxLen, Approx: true, Values: []any{
					"id", strconv.FormatInt(e.ID, 10), "order", strconv.FormatInt(e.OrderID, 10), "type", e.Type, "payload", e.Payload}})
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("order: relay: publish: %w", err)
		}
		if err := s.db.WithContext(ctx).Model(&event{}).Where("id IN ?", ids).Update("published_at", time.Now().UTC()).Error; err != nil {
			return n, fmt.Errorf("order: relay: mark published: %w", err)
		}
		n += len(batch)
	}
}
