package serve

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/outbox"
	"github.com/stockguard/shop/internal/testinfra"
)

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

	all := shoptest.FollowEvents(t, ns.Addr, stream, "--from-start")
	for _, want := range []int64{1, 2} {
		if e := all.Next(t); e.ID != want || e.Order != 7 || e.Type != "paid" || string(e.Payload) != fmt.Sprintf(`{"id":7,"event":%d}`, want) {
			t.Errorf("from the start: %+v, want event %d", e, want)
		}
	}
	// An entry the relay did not write is skipped.
	if err := rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: stream, Values: []any{"something", "else"}}).Err(); err != nil {
		t.Fatal(err)
	}
	publish(t, rdb, stream, 3)
	if e := all.Next(t); e.ID != 3 {
		t.Errorf("then: %+v, want event 3", e)
	}
	all.Stop(t)

	// A follower from now on may start after any event published while
	// it starts; it prints the first it sees and each one after it.
	now := shoptest.FollowEvents(t, ns.Addr, stream)
	id := int64(3)
	var first outbox.Published
	for deadline := time.Now().Add(30 * time.Second); first.ID == 0; {
		if time.Now().After(deadline) {
			t.Fatal("shop events printed nothing within 30s")
		}
		id++
		publish(t, rdb, stream, id)
		select {
		case first = <-now.Printed:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if first.ID <= 3 {
		t.Fatalf("from now on: printed event %d, published before it started", first.ID)
	}
	publish(t, rdb, stream, id+1)
	for want := first.ID + 1; want <= id+1; want++ {
		if e := now.Next(t); e.ID != want {
			t.Fatalf("printed %d, want %d", e.ID, want)
		}
	}
	now.Stop(t)
}
