package outbox_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/outbox"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// relayShop is an atomic shop's order service, with a payment window of an
// hour, its database and Redis, and an Outbox whose relay waits gapWait
// for a missing event id.
func relayShop(t *testing.T, gapWait time.Duration) (*order.Service, *outbox.Outbox, *gorm.DB, redis.UniversalClient) {
	t.Helper()
	s, err := strategy.Lookup("atomic")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strategytest.Config(t, s)
	cfg.PaymentWindow = time.Hour
	gdb := testinfra.ShopDB(t, cfg.MySQLDSN)
	b, p := strategytest.Open(t, s, cfg)
	return order.NewService(b.DB, p, nil), outbox.New(b.DB, &outbox.Options{GapWait: gapWait}), gdb, b.Redis
}

// streamIDs are the event ids in stream, in its order.
func streamIDs(t *testing.T, rdb redis.UniversalClient, stream string) []string {
	t.Helper()
	msgs, err := rdb.XRange(t.Context(), stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.Values["id"].(string)
	}
	return ids
}

// openEvent inserts an event in a transaction it leaves open, and returns
// the transaction and the event's id.
func openEvent(t *testing.T, gdb *gorm.DB) (*gorm.DB, string) {
	t.Helper()
	tx := gdb.Begin()
	t.Cleanup(func() { tx.Rollback() })
	if err := tx.Exec(`INSERT INTO order_events (order_id, type, payload, created_at) VALUES (1, 'placed', '{}', CURRENT_TIMESTAMP)`).Error; err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.Raw(`SELECT LAST_INSERT_ID()`).Scan(&id).Error; err != nil {
		t.Fatal(err)
	}
	return tx, fmt.Sprint(id)
}

// TestRelayWaitsForOpenTransaction: an event whose transaction took its id
// before a later event committed, and commits after the relay has
// published that later one, is published all the same, before it.
func TestRelayWaitsForOpenTransaction(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "SQLite has one writer: no transaction commits while another is open")
	svc, box, gdb, rdb := relayShop(t, time.Hour)
	stream := fmt.Sprint("test:events:open:", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(t.Context(), stream) })
	if _, err := svc.SetStock(t.Context(), "open", 5); err != nil {
		t.Fatal(err)
	}
	first := ordertest.Buy(t, svc, "open", "ann")
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 1 {
		t.Fatalf("relay: %d, %v; want 1", n, err)
	}
	tx, held := openEvent(t, gdb)
	later := ordertest.Buy(t, svc, "open", "bob") // commits its placed event after held's id
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 0 {
		t.Errorf("relay past an open transaction's event: %d, %v; want none published", n, err)
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 2 {
		t.Errorf("relay after it committed: %d, %v; want 2", n, err)
	}
	var laterID int64
	if err := gdb.Raw(`SELECT id FROM order_events WHERE order_id = ?`, later.ID).Scan(&laterID).Error; err != nil {
		t.Fatal(err)
	}
	ids := streamIDs(t, rdb, stream)
	if len(ids) != 3 || ids[1] != held || ids[2] != fmt.Sprint(laterID) {
		t.Errorf("stream ids %v; want %d's event, then %s, then %d (order %d's)", ids, first.ID, held, laterID, later.ID)
	}
}

// TestRelayPassesRolledBackGap: an id a transaction took and rolled back
// stops the relay until the gap wait has passed it, and then never again.
func TestRelayPassesRolledBackGap(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "SQLite takes a rolled-back id again: it leaves no gap")
	svc, box, gdb, rdb := relayShop(t, time.Nanosecond)
	stream := fmt.Sprint("test:events:gap:", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(t.Context(), stream) })
	if _, err := svc.SetStock(t.Context(), "gap", 5); err != nil {
		t.Fatal(err)
	}
	ordertest.Buy(t, svc, "gap", "ann")
	tx, gone := openEvent(t, gdb)
	if err := tx.Rollback().Error; err != nil {
		t.Fatal(err)
	}
	ordertest.Buy(t, svc, "gap", "bob")
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 1 {
		t.Errorf("relay on first seeing the gap: %d, %v; want the event before it", n, err)
	}
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 1 {
		t.Errorf("relay once the gap waited: %d, %v; want the event after it", n, err)
	}
	ordertest.Buy(t, svc, "gap", "cy")
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 1 {
		t.Errorf("relay of the next: %d, %v; want 1", n, err)
	}
	if ids := streamIDs(t, rdb, stream); len(ids) != 3 || slices.Contains(ids, gone) {
		t.Errorf("stream ids %v; want three, without the rolled-back %s", ids, gone)
	}
}

// TestRelayUpgrade: on a database of the release that marked each event,
// the relay's first run publishes the events left unpublished, and those
// published within the gap wait, which an open transaction's id may
// precede; none published before.
func TestRelayUpgrade(t *testing.T) {
	t.Parallel()
	_, box, gdb, rdb := relayShop(t, time.Hour)
	stream := fmt.Sprint("test:events:upgrade:", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(t.Context(), stream) })
	// Events 1 and 2 published two hours ago, 3 left behind by a late
	// commit, 4 published now, 5 new.
	old := time.Now().Add(-2 * time.Hour).UTC()
	err := gdb.Exec(`INSERT INTO order_events (id, order_id, type, payload, created_at, published_at) VALUES
		(1, 1, 'placed', '{}', ?, ?), (2, 1, 'paid', '{}', ?, ?),
		(3, 2, 'placed', '{}', CURRENT_TIMESTAMP, NULL), (4, 3, 'placed', '{}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP),
		(5, 4, 'placed', '{}', CURRENT_TIMESTAMP, NULL)`, old, old, old, old).Error
	if err != nil {
		t.Fatal(err)
	}
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 3 {
		t.Errorf("first relay: %d, %v; want 3", n, err)
	}
	if ids := streamIDs(t, rdb, stream); !slices.Equal(ids, []string{"3", "4", "5"}) {
		t.Errorf("stream ids %v; want 3, 4 and 5", ids)
	}
	// A stream renamed starts where the shop's relay got.
	renamed := stream + ":renamed"
	t.Cleanup(func() { rdb.Del(t.Context(), renamed) })
	if n, err := box.Relay(t.Context(), rdb, renamed); err != nil || n != 0 {
		t.Errorf("relay to a renamed stream: %d, %v; want none", n, err)
	}
}

// TestDeleteStockKeepsUnpublished: a SKU deleted takes its published
// events, and leaves those the relay has yet to publish, which it then
// publishes without waiting for them as missing.
func TestDeleteStockKeepsUnpublished(t *testing.T) {
	t.Parallel()
	svc, box, gdb, rdb := relayShop(t, time.Hour)
	stream := fmt.Sprint("test:events:delete:", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(t.Context(), stream) })
	if _, err := svc.SetStock(t.Context(), "del", 5); err != nil {
		t.Fatal(err)
	}
	ordertest.Buy(t, svc, "del", "ann")
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 1 {
		t.Fatalf("relay: %d, %v; want 1", n, err)
	}
	unpublished := ordertest.Buy(t, svc, "del", "bob")
	if err := svc.DeleteStock(t.Context(), "del"); err != nil {
		t.Fatal(err)
	}
	var left []int64
	if err := gdb.Raw(`SELECT order_id FROM order_events ORDER BY id`).Scan(&left).Error; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []int64{unpublished.ID}) {
		t.Errorf("events left of orders %v; want only the unpublished one's, of %d", left, unpublished.ID)
	}
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 1 {
		t.Errorf("relay after the delete: %d, %v; want 1", n, err)
	}
}

// TestRelayPassesGapOnceNoOlderTransaction: on MySQL, a rolled-back id
// passes as soon as every open transaction started after the relay saw
// it, long before the gap wait. Other tests' transactions on the server
// may hold it back a while.
func TestRelayPassesGapOnceNoOlderTransaction(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it reads MySQL's open transactions")
	svc, box, gdb, rdb := relayShop(t, time.Hour)
	stream := fmt.Sprint("test:events:trx:", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(t.Context(), stream) })
	if _, err := svc.SetStock(t.Context(), "trx", 5); err != nil {
		t.Fatal(err)
	}
	tx, _ := openEvent(t, gdb)
	if err := tx.Rollback().Error; err != nil {
		t.Fatal(err)
	}
	ordertest.Buy(t, svc, "trx", "ann")
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 0 {
		t.Fatalf("relay on first seeing the gap: %d, %v; want none", n, err)
	}
	for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		n, err := box.Relay(t.Context(), rdb, stream)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the gap still holds the relay back a minute on, %d published", n)
		}
	}
}
