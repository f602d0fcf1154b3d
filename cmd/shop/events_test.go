package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/outbox"
	"github.com/stockguard/shop/internal/testinfra"
)

// follower is a `shop events` run whose printed events the test reads.
type follower struct {
	printed chan outbox.Published // closed once it exits
	cancel  context.CancelFunc
	done    chan error
}

// followEvents runs `shop events` with args on the stream of the Redis at
// addr.
func followEvents(t *testing.T, addr, stream string, args ...string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	f := &follower{printed: make(chan outbox.Published, 1<<16), cancel: cancel, done: make(chan error, 1)}
	env := map[string]string{"SHOP_REDIS_ADDR": addr, "SHOP_EVENTS_STREAM": stream}
	go func() {
		err := run(ctx, append([]string{"events"}, args...), func(k string) string { return env[k] }, w, io.Discard)
		w.Close()
		f.done <- err
	}()
	go func() {
		defer close(f.printed)
		lines := bufio.NewScanner(r)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var e outbox.Published
			if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
				t.Errorf("shop events printed %s: %v", lines.Bytes(), err)
				continue
			}
			f.printed <- e
		}
	}()
	t.Cleanup(func() { cancel(); r.Close() })
	return f
}

// next returns the next event the follower prints, or fails the test if
// none comes.
func (f *follower) next(t *testing.T) outbox.Published {
	t.Helper()
	select {
	case e, ok := <-f.printed:
		if !ok {
			t.Fatal("shop events exited")
		}
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("shop events printed nothing within 30s")
	}
	return outbox.Published{}
}

// stop stops the follower as SIGINT does, and expects a clean exit.
func (f *follower) stop(t *testing.T) {
	t.Helper()
	f.cancel()
	select {
	case err := <-f.done:
		if err != nil {
			t.Errorf("shop events exited with %v after its ctx ended", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("shop events did not exit within 30s of its ctx ending")
	}
}

// publish adds event id of order to stream, as the relay does.
func publish(t *testing.T, rdb *redis.Client, stream string, id int64) {
	t.Helper()
	err := rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: stream, Values: []any{"id", strconv.FormatInt(id, 10),
		"order", "7", "type", "paid", "payload", fmt.Sprintf(`{"id":7,"event":%d}`, id)}}).Err()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEventsCommand: `shop events --from-start` prints what the stream
// holds, then what comes; without it, only what comes after it started.
// Each line carries the event's id, order, type and payload as JSON.
func TestEventsCommand(t *testing.T) {
	t.Parallel()
	ns := testinfra.Redis(t)
	stream := ns.Prefix + "events"
	rdb := redis.NewClient(&redis.Options{Addr: ns.Addr})
	t.Cleanup(func() { rdb.Close() })
	publish(t, rdb, stream, 1)
	publish(t, rdb, stream, 2)

	all := followEvents(t, ns.Addr, stream, "--from-start")
	for _, want := range []int64{1, 2} {
		if e := all.next(t); e.ID != want || e.Order != 7 || e.Type != "paid" || string(e.Payload) != fmt.Sprintf(`{"id":7,"event":%d}`, want) {
			t.Errorf("from the start: %+v, want event %d", e, want)
		}
	}
	// An entry the relay did not write is skipped.
	if err := rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: stream, Values: []any{"something", "else"}}).Err(); err != nil {
		t.Fatal(err)
	}
	publish(t, rdb, stream, 3)
	if e := all.next(t); e.ID != 3 {
		t.Errorf("then: %+v, want event 3", e)
	}
	all.stop(t)

	// A follower from now on may start after any event published while
	// it starts; it prints the first it sees and each one after it.
	now := followEvents(t, ns.Addr, stream)
	id := int64(3)
	var first outbox.Published
	for deadline := time.Now().Add(30 * time.Second); first.ID == 0; {
		if time.Now().After(deadline) {
			t.Fatal("shop events printed nothing within 30s")
		}
		id++
		publish(t, rdb, stream, id)
		select {
		case first = <-now.printed:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if first.ID <= 3 {
		t.Fatalf("from now on: printed event %d, published before it started", first.ID)
	}
	publish(t, rdb, stream, id+1)
	for want := first.ID + 1; want <= id+1; want++ {
		if e := now.next(t); e.ID != want {
			t.Fatalf("printed %d, want %d", e.ID, want)
		}
	}
	now.stop(t)
}
