package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/tracing"
)

// followBlock is how long one read of the stream waits for new events: a
// follower stopped meanwhile exits within it.
const followBlock = time.Second

// eventLine is one order event as `shop events` prints it.
type eventLine struct {
	ID      int64           `json:"id"`
	Order   int64           `json:"order"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"` // the order after the transition
	// TraceID is the trace of the request that made the transition, when
	// it was traced.
	TraceID string `json:"trace_id,omitempty"`
}

// events follows the stream of the order events, SHOP_EVENTS_STREAM on
// SHOP_REDIS_ADDR, and prints each as a JSON line, until ctx ends. It
// starts at the end of the stream, or with --from-start at its start.
// Delivery is at least once: an event published again has the id it had,
// by which a reader drops it.
func events(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	fs := newFlags("events", "usage: shop events [--from-start] [flags]\n\n"+
		"Follows the order events, printing each as a line of JSON: id, order, type, payload\n"+
		"(the order after the transition) and trace_id (the trace of the request that made it,\n"+
		"if it was traced). An event may come twice, with the same id.\n\n", stderr)
	fromStart := fs.Bool("from-start", false, "print every event the stream holds first; else only those published from now on")
	cfg, err := parseConfig(fs, args, config.Flags(fs, getenv, nil, config.ForEvents))
	if err != nil {
		return err
	}
	if len(cfg.RedisAddrs()) == 0 {
		return errors.New("shop events needs SHOP_REDIS_ADDR (--redis)")
	}
	rdb := backend.NewRedis(backend.RedisOptions(cfg))
	defer rdb.Close()
	return follow(ctx, rdb, cfg.Events(), *fromStart, stdout, stderr)
}

// follow prints the events of stream as they come, until ctx ends.
func follow(ctx context.Context, rdb redis.UniversalClient, stream string, fromStart bool, stdout, stderr io.Writer) error {
	after := "0-0"
	if !fromStart {
		// The stream's last entry now, rather than "$" on every read, which
		// would skip what comes between two reads.
		last, err := rdb.XRevRangeN(ctx, stream, "+", "-", 1).Result()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("events: %s: %w", stream, err)
		}
		if len(last) > 0 {
			after = last[0].ID
		}
	}
	enc := json.NewEncoder(stdout)
	for {
		got, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, after}, Count: 500, Block: followBlock}).Result()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, redis.Nil): // nothing new within followBlock
			continue
		case err != nil:
			return fmt.Errorf("events: %s: %w", stream, err)
		}
		for _, m := range got[0].Messages {
			after = m.ID
			line, err := lineOf(m)
			if err != nil {
				fmt.Fprintf(stderr, "shop events: entry %s of %s: %v; skipped\n", m.ID, stream, err)
				continue
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
	}
}

// lineOf reads an entry as the relay writes it.
func lineOf(m redis.XMessage) (eventLine, error) {
	field := func(k string) string { s, _ := m.Values[k].(string); return s }
	var l eventLine
	var err1, err2 error
	l.ID, err1 = strconv.ParseInt(field("id"), 10, 64)
	l.Order, err2 = strconv.ParseInt(field("order"), 10, 64)
	l.Type, l.Payload = field("type"), json.RawMessage(field("payload"))
	if sc := tracing.SpanContextOf(field("traceparent")); sc.IsValid() {
		l.TraceID = sc.TraceID().String()
	}
	if err := errors.Join(err1, err2); err != nil || l.Type == "" || !json.Valid(l.Payload) {
		return eventLine{}, fmt.Errorf("not an order event: %v", m.Values)
	}
	return l, nil
}
