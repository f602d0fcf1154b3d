package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/lock"
)

// transitions are the orders' lives, as the types of their events.
var transitions = []string{"placed", "placed,paid", "placed,paid,refunded", "placed,cancelled", "placed,expired"}

// relayKilled: the relay, held back until now, publishes the events of
// every phase, and the shop that runs it is killed mid-run; another takes
// over. A consumer, `shop events --from-start`, gets every event the
// database has, an event published twice with the same id and content,
// and each order's events in the order of its transitions.
func (w *windowSale) relayKilled(t *testing.T, held *lock.Lease) {
	stream := w.prefix + "events" // SHOP_EVENTS_STREAM's default
	total := w.unpublished(t)
	if total == 0 {
		t.Fatal("no event unpublished: the relay was not held back")
	}
	// One shop is left to take the relay job, and killed as soon as it has
	// done the first step of publishing a batch, whichever it is: the
	// stream grows, or events are marked published. A relay that publishes
	// then marks dies before it marks; one that marked first would die
	// before it publishes.
	up := w.up()
	runner, others := up[0], up[1:]
	for _, o := range others {
		w.setDown(o, true)
		o.pause(t)
	}
	release(t, held)
	for end := time.Now().Add(30 * time.Second); w.rdb.XLen(t.Context(), stream).Val() == 0 && w.unpublished(t) == total; {
		if time.Now().After(end) {
			t.Fatal("the relay published nothing within 30s")
		}
	}
	w.kill(t, runner)
	if w.owner(t, "relay") == "" {
		t.Error("the relay's run was over when its shop was killed")
	}
	published := w.rdb.XLen(t.Context(), stream).Val()
	for _, o := range others {
		w.resume(t, o)
	}
	if published >= total {
		t.Errorf("the relay had published all %d events before it was killed", total)
	}
	for end := time.Now().Add(time.Minute); w.unpublished(t) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d events still unpublished a minute after the relay's runner was killed", w.unpublished(t))
		}
	}

	entries := w.rdb.XLen(t.Context(), stream).Val()
	f := followEvents(t, w.redisAddr, stream, "--from-start")
	seen := map[int64]eventLine{}
	byOrder := map[int64][]string{}
	for range entries {
		e := f.next(t)
		if first, ok := seen[e.ID]; ok {
			if e.Order != first.Order || e.Type != first.Type || string(e.Payload) != string(first.Payload) {
				t.Errorf("event %d published as %+v, then as %+v", e.ID, first, e)
			}
			continue
		}
		seen[e.ID] = e
		byOrder[e.Order] = append(byOrder[e.Order], e.Type)
	}
	f.stop(t)
	t.Logf("%d events: %d published when the relay's runner was killed; %d entries in the stream, %d of them again",
		total, published, entries, entries-int64(len(seen)))

	var events []struct {
		ID      int64
		OrderID int64
		Type    string
		Payload string
	}
	if err := w.gdb.Raw(`SELECT id, order_id, type, payload FROM order_events ORDER BY id`).Scan(&events).Error; err != nil {
		t.Fatal(err)
	}
	want := map[int64][]string{}
	for _, e := range events {
		want[e.OrderID] = append(want[e.OrderID], e.Type)
		if got, ok := seen[e.ID]; !ok || got.Order != e.OrderID || got.Type != e.Type || string(got.Payload) != e.Payload {
			t.Errorf("event %+v: the consumer got %+v (%v)", e, got, ok)
		}
	}
	if len(seen) != len(events) {
		t.Errorf("the consumer got %d events, the database has %d", len(seen), len(events))
	}
	for id, types := range want {
		if life := strings.Join(types, ","); !slices.Contains(transitions, life) || !slices.Equal(byOrder[id], types) {
			t.Errorf("order %d: the database has the events %s, the consumer got %v", id, life, byOrder[id])
		}
	}
}

// unpublished counts the events the relay has not marked published.
func (w *windowSale) unpublished(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := w.gdb.Raw(`SELECT COUNT(*) FROM order_events WHERE published_at IS NULL`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}
