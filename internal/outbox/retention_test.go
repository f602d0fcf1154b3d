package outbox_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/outbox"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestEventRetention: the events published before the retention are gone
// from the stream and from the table; a recent one stays, and so does an
// old one that was never published.
func TestEventRetention(t *testing.T) {
	t.Parallel()
	svc, box, gdb, rdb := relayShop(t, time.Hour)
	ctx := t.Context()
	stream := fmt.Sprint("test:events:retention:", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(ctx, stream) })
	const retention = 168 * time.Hour
	old := time.Now().Add(-retention - time.Hour).UTC()
	// Two entries the relay added 169 hours ago: a stream entry's id is
	// the time it was added.
	for i := range 2 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: fmt.Sprintf("%d-%d", old.UnixMilli(), i+1), Values: []any{"id", "0"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.SetStock(ctx, "kept", 5); err != nil {
		t.Fatal(err)
	}
	o := ordertest.Buy(t, svc, "kept", "ann")
	if _, _, err := svc.Pay(ctx, o.ID, "p"); err != nil {
		t.Fatal(err)
	}
	if n, err := box.Relay(ctx, rdb, stream); err != nil || n != 2 {
		t.Fatalf("relay: %d, %v; want 2", n, err)
	}
	// The placed event was made 169 hours ago, and published; one event
	// as old was never published: it committed after the relay's run.
	if err := gdb.Exec(`UPDATE order_events SET created_at = ? WHERE type = 'placed'`, old).Error; err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec(`INSERT INTO order_events (order_id, type, payload, created_at) VALUES (?, 'placed', '{}', ?)`, o.ID, old).Error; err != nil {
		t.Fatal(err)
	}

	n, err := box.Purge(ctx, rdb, stream, time.Now().Add(-retention))
	if err != nil || n != 1 {
		t.Errorf("purge: %d rows, %v; want 1", n, err)
	}
	var rows []struct {
		Type      string
		CreatedAt time.Time
	}
	if err := gdb.Raw(`SELECT type, created_at FROM order_events ORDER BY id`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Type != order.EventPaid || rows[1].Type != order.EventPlaced || !rows[1].CreatedAt.Before(old.Add(time.Second)) {
		t.Errorf("rows left: %+v; want the recent paid event and the old unpublished one", rows)
	}
	msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Values["type"] != order.EventPlaced || msgs[1].Values["type"] != order.EventPaid {
		t.Errorf("stream left: %v; want the two entries the relay added now", msgs)
	}
}

// TestStreamCap: the relay caps the stream at about SHOP_EVENTS_MAXLEN
// entries: Redis trims whole nodes of up to 100 entries, so 1000 events
// under a cap of 10 leave from 10 to 110.
func TestStreamCap(t *testing.T) {
	t.Parallel()
	s, err := strategy.Lookup("atomic")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strategytest.Config(t, s)
	gdb := testinfra.ShopDB(t, cfg.MySQLDSN)
	b, _ := strategytest.Open(t, s, cfg)
	box := outbox.New(b.DB, &outbox.Options{StreamMaxLen: 10})
	values := strings.Repeat("(1, 'placed', '{}', CURRENT_TIMESTAMP), ", 999) + "(1, 'placed', '{}', CURRENT_TIMESTAMP)"
	if err := gdb.Exec(`INSERT INTO order_events (order_id, type, payload, created_at) VALUES ` + values).Error; err != nil {
		t.Fatal(err)
	}
	stream := fmt.Sprint("test:events:cap:", time.Now().UnixNano())
	t.Cleanup(func() { b.Redis.Del(t.Context(), stream) })
	if n, err := box.Relay(t.Context(), b.Redis, stream); err != nil || n != 1000 {
		t.Fatalf("relay: %d, %v; want 1000", n, err)
	}
	if n, err := b.Redis.XLen(t.Context(), stream).Result(); err != nil || n < 10 || n > 110 {
		t.Errorf("stream length %d, %v; want 10 to 110", n, err)
	}
}
