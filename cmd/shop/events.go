package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/outbox"
)

// followBlock is how long one read of the stream waits for new events: a
// follower stopped meanwhile exits within it.
const followBlock = time.Second

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
			line, err := outbox.ReadPublished(m)
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
