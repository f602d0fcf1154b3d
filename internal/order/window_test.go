package order_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/order/ordertest"
	"github.com/stockguard/shop/internal/outbox"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

const (
	// window is the payment window of the tests of deadlines: short, so
	// that deadlines pass while they run. An order they pay is paid at
	// once, a few queries after it was placed.
	window = 500 * time.Millisecond
	// noDeadline is the payment window of the tests of what a payment
	// does: no deadline passes while they run, however busy the machine.
	// (TestPayOnce's thousand callbacks once took longer than window, on
	// a machine at a load of 10, and found the order expired.)
	noDeadline = time.Hour
)

// windowShop is an instance of the named strategy with payment window w,
// on a fresh database, and the shop's Redis.
func windowShop(t *testing.T, name string, w time.Duration) (*order.Service, *gorm.DB, redis.UniversalClient) {
	t.Helper()
	s, err := strategy.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strategytest.Config(t, s)
	cfg.PaymentWindow, cfg.PerUserLimit = w, 2
	gdb := testinfra.ShopDB(t, cfg.MySQLDSN)
	b, p := strategytest.Open(t, s, cfg)
	return order.NewService(b.DB, p, nil), gdb, b.Redis
}

// buy places user's order of a unit of sku with svc.
var buy = ordertest.Buy

// TestPaymentWindow walks each strategy's orders through the window: one
// paid, one cancelled by its buyer, one past its deadline, whose payment is
// refused and which the expiry job cancels. Their stock comes back once,
// the paid order's stays taken, and the audit holds.
func TestPaymentWindow(t *testing.T) {
	t.Parallel()
	for _, name := range strategy.Names() {
		s, _ := strategy.Lookup(name)
		if slices.Contains(s.Needs, backend.ZooKeeper) || slices.Contains(s.Needs, backend.Etcd) {
			continue // the lock strategies' composition is one: redis and dbtable stand for them
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			svc, gdb, _ := windowShop(t, name, window)
			const sku = "window"
			if _, err := svc.SetStock(t.Context(), sku, 5); err != nil {
				t.Fatal(err)
			}
			paid, cancelled, late := buy(t, svc, sku, "ann"), buy(t, svc, sku, "bob"), buy(t, svc, sku, "cid")
			for _, o := range []order.Order{paid, cancelled, late} {
				if o.Status != order.StatusPending || o.ExpiresAt == nil {
					t.Fatalf("placed %+v, want pending with a deadline", o)
				}
			}
			if o, replayed, err := svc.Pay(t.Context(), paid.ID, "pay-ann"); err != nil || replayed || o.Status != order.StatusPaid {
				t.Fatalf("pay: %+v, %v, %v", o, replayed, err)
			}
			if o, _, err := svc.Cancel(t.Context(), cancelled.ID, "bob", "c-1"); err != nil || o.Status != order.StatusCancelled {
				t.Fatalf("cancel: %+v, %v", o, err)
			}
			if _, _, err := svc.Cancel(t.Context(), paid.ID, "ann", "c-2"); !errors.Is(err, order.ErrAlreadyPaid) {
				t.Errorf("cancel of a paid order: %v, want ErrAlreadyPaid", err)
			}
			if _, _, err := svc.Refund(t.Context(), late.ID, "cid", "r-1"); !errors.Is(err, order.ErrNotPaid) {
				t.Errorf("refund of a pending order: %v, want ErrNotPaid", err)
			}
			time.Sleep(window + 100*time.Millisecond) // the deadline of late passes
			if _, _, err := svc.Pay(t.Context(), late.ID, "pay-cid"); !errors.Is(err, order.ErrOrderExpired) {
				t.Errorf("pay past the deadline: %v, want ErrOrderExpired", err)
			}
			if n, err := svc.Expire(t.Context(), 0); err != nil || n != 1 {
				t.Errorf("expire: %d, %v; want the late order", n, err)
			}
			a, err := audit.SKU(t.Context(), gdb, sku, 0, []int64{paid.ID})
			if err != nil {
				t.Fatal(err)
			}
			if v := a.Violations(); len(v) > 0 || a.Available != 4 || a.Orders != 1 {
				t.Errorf("audit %+v: %v; want 4 available and 1 live order", a, v)
			}
			if got := events(t, gdb); !slices.Equal(got[paid.ID], []string{"placed", "paid"}) ||
				!slices.Equal(got[cancelled.ID], []string{"placed", "cancelled"}) || !slices.Equal(got[late.ID], []string{"placed", "expired"}) {
				t.Errorf("events %v", got)
			}
		})
	}
}

// events returns each order's events, in id order.
func events(t *testing.T, gdb *gorm.DB) map[int64][]string {
	t.Helper()
	var rows []struct {
		OrderID int64
		Type    string
	}
	if err := gdb.Raw(`SELECT order_id, type FROM order_events ORDER BY id`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	got := map[int64][]string{}
	for _, r := range rows {
		got[r.OrderID] = append(got[r.OrderID], r.Type)
	}
	return got
}

// TestPayOnce: 500 concurrent callbacks with one payment id pay the order
// once and answer alike, all but the first as replays; 500 with different ids for another order pay it
// once, and the other 499 are kept as orphaned, answered already-paid.
func TestPayOnce(t *testing.T) {
	t.Parallel()
	svc, gdb, _ := windowShop(t, "atomic", noDeadline)
	const sku = "pay-once"
	if _, err := svc.SetStock(t.Context(), sku, 5); err != nil {
		t.Fatal(err)
	}
	one, many := buy(t, svc, sku, "ann"), buy(t, svc, sku, "bob")
	const n = 500
	errs := make([]error, 2*n)
	var fresh atomic.Int64 // answers to one payment id not marked replayed
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			var replayed bool
			if _, replayed, errs[i] = svc.Pay(t.Context(), one.ID, "same"); !replayed {
				fresh.Add(1)
			}
		})
		wg.Go(func() {
			<-gate
			_, _, errs[n+i] = svc.Pay(t.Context(), many.ID, fmt.Sprint("pay-", i))
		})
	}
	close(gate)
	wg.Wait()
	if fresh.Load() != 1 {
		t.Errorf("%d answers to one payment id were not marked replayed, want 1", fresh.Load())
	}
	paidMany := 0
	for i, err := range errs {
		switch {
		case i < n && err != nil:
			t.Errorf("callback %d with one payment id: %v", i, err)
		case i >= n && err == nil:
			paidMany++
		case i >= n && !errors.Is(err, order.ErrAlreadyPaid):
			t.Errorf("callback %d with its own payment id: %v, want paid or ErrAlreadyPaid", i, err)
		}
	}
	count := func(id int64, status string) (n int64) {
		gdb.Raw(`SELECT COUNT(*) FROM payments WHERE order_id = ? AND status = ?`, id, status).Row().Scan(&n)
		return n
	}
	if paidMany != 1 || count(one.ID, order.PaymentPaid) != 1 || count(one.ID, order.PaymentOrphaned) != 0 ||
		count(many.ID, order.PaymentPaid) != 1 || count(many.ID, order.PaymentOrphaned) != n-1 {
		t.Errorf("%d of many paid; payments: one %d paid, %d orphaned; many %d paid, %d orphaned; want 1; 1, 0; 1, %d",
			paidMany, count(one.ID, order.PaymentPaid), count(one.ID, order.PaymentOrphaned), count(many.ID, order.PaymentPaid), count(many.ID, order.PaymentOrphaned), n-1)
	}
	if _, replayed, err := svc.Pay(t.Context(), many.ID, "pay-0"); !replayed || (err != nil && !errors.Is(err, order.ErrAlreadyPaid)) {
		t.Errorf("a callback again: replayed %v, %v", replayed, err)
	}
	if _, _, err := svc.Pay(t.Context(), one.ID, "pay-0"); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Errorf("a payment id of another order: %v, want ErrKeyReused", err)
	}
	if a, err := audit.SKU(t.Context(), gdb, sku, 0, nil); err != nil || len(a.Violations()) > 0 {
		t.Errorf("audit %+v, %v: %v", a, err, a.Violations())
	}
}

// TestExpiryFenced: a run of the expiry job that a later run overtook
// writes nothing.
func TestExpiryFenced(t *testing.T) {
	t.Parallel()
	svc, gdb, _ := windowShop(t, "atomic", window)
	const sku = "fenced"
	if _, err := svc.SetStock(t.Context(), sku, 5); err != nil {
		t.Fatal(err)
	}
	first, second := buy(t, svc, sku, "ann"), buy(t, svc, sku, "bob")
	time.Sleep(window + 100*time.Millisecond)
	if _, _, err := svc.Cancel(t.Context(), second.ID, "bob", "c"); err != nil { // leaves one due order
		t.Fatal(err)
	}
	if err := gdb.Exec(`INSERT INTO job_fences (name, token) VALUES ('expiry', 7)`).Error; err != nil {
		t.Fatal(err)
	}
	if n, err := svc.Expire(t.Context(), 6); !errors.Is(err, stock.ErrFenced) || n != 0 {
		t.Errorf("a stale run: %d cancelled, %v; want none, fenced", n, err)
	}
	if o, err := svc.Get(t.Context(), first.ID); err != nil || o.Status != order.StatusPending {
		t.Errorf("after the stale run: %+v, %v; want it pending", o, err)
	}
	if n, err := svc.Expire(t.Context(), 8); err != nil || n != 1 {
		t.Errorf("a later run: %d cancelled, %v; want 1", n, err)
	}
}

// TestRelay: the events are published in id order, each order's in the
// order of its transitions; a relay that dies after publishing and before
// moving its cursor publishes them again, which consumers tell apart by id.
func TestRelay(t *testing.T) {
	t.Parallel()
	svc, gdb, rdb := windowShop(t, "atomic", noDeadline)
	const sku = "relay"
	if _, err := svc.SetStock(t.Context(), sku, 5); err != nil {
		t.Fatal(err)
	}
	o := buy(t, svc, sku, "ann")
	if _, _, err := svc.Pay(t.Context(), o.ID, "p"); err != nil {
		t.Fatal(err)
	}
	box := outbox.New(gdb, nil)
	stream := "test:events:" + sku + fmt.Sprint(time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(t.Context(), stream) })
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 2 {
		t.Fatalf("relay: %d, %v; want 2", n, err)
	}
	// As if the relay had died before it moved its cursor.
	if err := gdb.Exec(`UPDATE event_cursors SET last_id = 0`).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := box.Relay(t.Context(), rdb, stream); err != nil {
		t.Fatal(err)
	}
	msgs, err := rdb.XRange(t.Context(), stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids, types []string
	seen := map[string]bool{}
	for _, m := range msgs {
		id := m.Values["id"].(string)
		ids = append(ids, id)
		if !seen[id] {
			seen[id] = true
			types = append(types, m.Values["type"].(string))
		}
	}
	if len(msgs) != 4 || ids[0] != ids[2] || ids[1] != ids[3] || !slices.Equal(types, []string{"placed", "paid"}) {
		t.Errorf("stream ids %v, first-seen types %v; want two events twice, placed before paid", ids, types)
	}
	if n, err := box.Relay(t.Context(), rdb, stream); err != nil || n != 0 {
		t.Errorf("relay of nothing new: %d, %v", n, err)
	}
}
