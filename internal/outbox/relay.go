// Package outbox is the shop's transactional outbox of order events:
// every order transition writes an event row in the transaction that
// makes it (Record), and Relay, a job on one instance at a time,
// publishes the rows to a Redis stream and moves a cursor past them
// (cursor.go); Purge forgets what was published before the retention
// (retention.go).
// Delivery is at least once, and in order per order: an order's next
// transition starts after the last one committed, so its event has a
// larger id, and Relay publishes in id order. Each event's id is unique:
// a consumer drops an id it has seen. See docs/orders.md#order-events.
package outbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/tracing"
)

// Options tune an Outbox; nil is valid.
type Options struct {
	// StreamMaxLen caps the events stream at about this many entries as
	// Relay adds to it (XADD MAXLEN ~); 0 means no cap.
	StreamMaxLen int64
	// GapWait is how long Relay waits for a missing event id before it
	// passes it (cursor.go); 0 means DefaultGapWait.
	GapWait time.Duration
}

// Outbox relays the order events of a database to Redis streams.
type Outbox struct {
	db     *gorm.DB
	maxLen int64 // of the events stream; 0: none
	gaps   *gaps // the missing event ids Relay waits for
}

// New returns the Outbox of gdb's order events.
func New(gdb *gorm.DB, opts *Options) *Outbox {
	o := &Outbox{db: gdb}
	var gapWait time.Duration
	if opts != nil {
		o.maxLen, gapWait = opts.StreamMaxLen, opts.GapWait
	}
	o.gaps = newGaps(gdb, gapWait)
	return o
}

// event is one row of order_events.
type event struct {
	ID          int64
	OrderID     int64
	Type        string
	Payload     string // the order after the transition, as JSON
	CreatedAt   time.Time
	PublishedAt *time.Time
	// Traceparent is the W3C traceparent of the request that made the
	// transition, if it was traced: the relay passes it on.
	Traceparent *string
}

func (event) TableName() string { return "order_events" }

// Entry is one event to record: its order's id, and the order after the
// transition as JSON.
type Entry struct {
	OrderID int64
	Payload string
}

// Record writes the events of type kind of entries in tx, the i-th with
// parents[i], the traceparent of its request, when parents is not nil.
// One INSERT written here, as a batch's orders are: GORM would reflect on
// every row, and a batch records hundreds.
func Record(tx *gorm.DB, kind string, entries []Entry, parents []string) (err error) {
	if len(entries) == 0 {
		return nil
	}
	ctx, span := tracing.Statement(tx.Statement.Context, tx.Dialector.Name(), "INSERT", "order_events", len(entries))
	defer func() { tracing.End(span, err) }()
	insert, row, cols := `INSERT INTO order_events (order_id, type, payload, created_at) VALUES `, "(?, ?, ?, ?)", 4
	if parents != nil {
		insert, row, cols = `INSERT INTO order_events (order_id, type, payload, created_at, traceparent) VALUES `, "(?, ?, ?, ?, ?)", 5
	}
	var q strings.Builder
	q.Grow(len(insert) + (len(row)+2)*len(entries))
	q.WriteString(insert)
	args := make([]any, 0, cols*len(entries))
	now := time.Now().UTC()
	for i, e := range entries {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(row)
		args = append(args, e.OrderID, kind, e.Payload, now)
		if parents != nil {
			var parent *string
			if parents[i] != "" {
				parent = &parents[i]
			}
			args = append(args, parent)
		}
	}
	_, err = tx.Statement.ConnPool.ExecContext(ctx, q.String(), args...)
	return err
}

// relayBatch bounds the events one round of Relay reads and publishes.
const relayBatch = 500

// Relay publishes the events past the stream's cursor (cursor.go) to the
// Redis stream, in id order, capping it at about Options.StreamMaxLen
// entries, each with its fields id, order, type and payload (the order as
// JSON), and traceparent when the transition was traced, and then moves
// the cursor past them. It stops at a missing id until the gap wait has
// passed it. It returns how many it published. A relay that dies between
// the two publishes them again: consumers drop the ids they have seen.
func (s *Outbox) Relay(ctx context.Context, rdb redis.UniversalClient, stream string) (int, error) {
	cursor, err := s.cursor(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("outbox: relay: read the cursor: %w", err)
	}
	n := 0
	for {
		var batch []event
		before := s.gaps.before(ctx)
		if err := s.db.WithContext(ctx).Where("id > ?", cursor).Order("id").Limit(relayBatch).Find(&batch).Error; err != nil {
			return n, fmt.Errorf("outbox: relay: %w", err)
		}
		ready := s.gaps.ready(ctx, cursor, batch, before)
		if ready == 0 {
			return n, nil
		}
		if err := s.publish(ctx, rdb, stream, batch[:ready]); err != nil {
			return n, err
		}
		cursor = batch[ready-1].ID
		if err := s.advance(ctx, stream, cursor); err != nil {
			return n, err
		}
		n += ready
		if ready < len(batch) {
			return n, nil
		}
	}
}

// publish adds batch's events to the stream, in one pipeline.
func (s *Outbox) publish(ctx context.Context, rdb redis.UniversalClient, stream string, batch []event) error {
	var spans []trace.Span // of each event's publication, when the run is traced
	if tracing.Recording(ctx) {
		spans = make([]trace.Span, len(batch))
	}
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, e := range batch {
			values := []any{"id", strconv.FormatInt(e.ID, 10), "order", strconv.FormatInt(e.OrderID, 10), "type", e.Type, "payload", e.Payload}
			if e.Traceparent != nil {
				values = append(values, "traceparent", *e.Traceparent)
			}
			pctx := ctx
			if spans != nil {
				pctx, spans[i] = tracePublish(ctx, stream, e)
			}
			p.XAdd(pctx, &redis.XAddArgs{Stream: stream, MaxLen: s.maxLen, Approx: true, Values: values})
		}
		return nil
	})
	for _, span := range spans {
		tracing.End(span, err)
	}
	if err != nil {
		return fmt.Errorf("outbox: relay: publish: %w", err)
	}
	return nil
}

// tracePublish starts the producer span of one event's publication, in the
// relay's run, linked to the span of the request that made it.
func tracePublish(ctx context.Context, stream string, e event) (context.Context, trace.Span) {
	var links []trace.Link
	if e.Traceparent != nil {
		if sc := tracing.SpanContextOf(*e.Traceparent); sc.IsValid() {
			links = []trace.Link{{SpanContext: sc}}
		}
	}
	return tracing.Tracer().Start(ctx, "send "+stream, trace.WithSpanKind(trace.SpanKindProducer), trace.WithLinks(links...),
		trace.WithAttributes(semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(stream), semconv.MessagingMessageID(strconv.FormatInt(e.ID, 10)),
			attribute.String("shop.event.type", e.Type), attribute.Int64("shop.order.id", e.OrderID)))
}
