package window

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/outbox"
)

// transitions are the orders' lives, as the types of their events.
var transitions = []string{"placed", "placed,paid", "placed,paid,refunded", "placed,cancelled", "placed,expired"}

// relayKilled: the relay, held back until now, publishes the events of
// every phase, and the shop that runs it is killed mid-run; another takes
// over. A consumer, `shop events --from-start`, gets every event the
// database has, an event published twice with the same id and content,
// and each order's events in the order of its transitions.
func (w *windowSale) relayKilled(t *testing.T, held *lock.Lease) {
	stream := w.Prefix + "events" // SHOP_EVENTS_STREAM's default
	total := w.unpublished(t)
	if total == 0 {
		t.Fatal("no event unpublished: the relay was not held back")
	}
	// One shop is left to take the relay job, and killed mid-publish: the
	// test holds the row lock of the stream's cursor, set where the
	// relay's first run would set it, before every event, so that the
	// relay, having published its first batch, waits to move it, until
	// its stream stops growing. Its successor publishes that batch again.
	// The retention job, which runs once a minute, sets the cursor where
	// the relay would if it comes first.
	if err := w.GDB.Exec(`INSERT INTO event_cursors (stream, last_id) VALUES (?, 0) ON DUPLICATE KEY UPDATE last_id = 0`, stream).Error; err != nil {
		t.Fatal(err)
	}
	lock := w.GDB.Begin()
	if err := lock.Exec(`SELECT last_id FROM event_cursors WHERE stream = ? FOR UPDATE`, stream).Error; err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	up := w.up()
	runner, others := up[0], up[1:]
	for _, o := range others {
		w.setDown(o, true)
		o.Pause(t)
	}
	release(t, held)
	for end, before := time.Now().Add(30*time.Second), int64(-1); ; time.Sleep(200 * time.Millisecond) {
		n := w.RDB.XLen(t.Context(), stream).Val()
		if n > 0 && n == before {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the relay published %d of %d events within 30s, and kept publishing", n, total)
		}
		before = n
	}
	w.kill(t, runner)
	published, marked := w.RDB.XLen(t.Context(), stream).Val(), total-w.unpublished(t) // marked: behind the cursor
	if w.owner(t, "relay") == "" || marked >= published {
		t.Errorf("the relay was not killed mid-publish: its run over (%v), %d events published, %d marked", w.owner(t, "relay") == "", published, marked)
	}
	lock.Rollback()
	for _, o := range others {
		w.resume(t, o)
	}
	for end := time.Now().Add(time.Minute); w.unpublished(t) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d events still unpublished a minute after the relay's runner was killed", w.unpublished(t))
		}
	}

	entries := w.RDB.XLen(t.Context(), stream).Val()
	f := shoptest.FollowEvents(t, w.RedisAddr, stream, "--from-start")
	seen := map[int64]outbox.Published{}
	byOrder := map[int64][]string{}
	for range entries {
		e := f.Next(t)
		if first, ok := seen[e.ID]; ok {
			if e.Order != first.Order || e.Type != first.Type || string(e.Payload) != string(first.Payload) {
				t.Errorf("event %d published as %+v, then as %+v", e.ID, first, e)
			}
			continue
		}
		seen[e.ID] = e
		byOrder[e.Order] = append(byOrder[e.Order], e.Type)
	}
	f.Stop(t)
	t.Logf("%d events: %d published and %d marked when the relay's runner was killed; %d entries in the stream, %d of them again",
		total, published, marked, entries, entries-int64(len(seen)))
	// The killed relay's UPDATE of the cursor may still commit once the
	// test's lock is gone: MariaDB runs a statement whose client died to
	// its end. Then nothing is published twice, and nothing is lost
	// either way.

	var events []struct {
		ID      int64
		OrderID int64
		Type    string
		Payload string
	}
	if err := w.GDB.Raw(`SELECT id, order_id, type, payload FROM order_events ORDER BY id`).Scan(&events).Error; err != nil {
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

// unpublished counts the events past the relay's cursor.
func (w *windowSale) unpublished(t *testing.T) int64 {
	t.Helper()
	var n int64
	err := w.GDB.Raw(`SELECT COUNT(*) FROM order_events WHERE id > COALESCE((SELECT last_id FROM event_cursors WHERE stream = ?), 0)`,
		w.Prefix+"events").Scan(&n).Error
	if err != nil {
		t.Fatal(err)
	}
	return n
}
