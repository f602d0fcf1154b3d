package groupcommit

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// A buyer answered busy asks again with the same key, as the fault tests'
// buyers do. These tests hold its first request's batch at a chosen
// statement and check that the key never gets two answers: its order and
// sold out.

// TestBatchedRetryDuringItsBatch: the first request's batch has granted
// its order and waits to commit when the buyer, answered busy, asks
// again, on the same instance and on another. The SKU is sold out once
// that batch commits. Neither retry is told sold out: each waits for the
// batch, which holds the stock row, and gets the order.
func TestBatchedRetryDuringItsBatch(t *testing.T) {
	t.Parallel()
	r := newRetrySale(t, 3)
	first := order.PlaceRequest{SKU: r.sku, UserID: "ann", Quantity: 1, IdempotencyKey: "ann-1"}
	// An order of ann's key, not committed, holds the batch at its INSERT,
	// after it took the units and while it locks the stock row.
	blocker := r.gdb.Begin()
	t.Cleanup(func() { blocker.Rollback() })
	if err := blocker.Exec(`INSERT INTO orders (sku, user_id, quantity, status, idempotency_key, created_at)
		VALUES (?, ?, 1, ?, ?, NOW(6))`, r.sku, first.UserID, order.StatusCreated, first.IdempotencyKey).Error; err != nil {
		t.Fatal(err)
	}
	annCtx, annGone := context.WithCancel(t.Context())
	ann, bob := r.queueBehind(t, call{annCtx, first}, call{t.Context(), r.buyer("bob")})
	r.pause.release <- struct{}{}
	testinfra.WaitFor(t, "the batch of ann and bob to wait at its INSERT", func() bool { return r.running(t, "INSERT INTO orders%'bob-1'%") })
	annGone()
	if a := <-ann; !errors.Is(a.Err, stock.ErrBusy) {
		t.Fatalf("ann, gone while her batch commits: %+v, want busy", a)
	}

	same, other := r.place(r.a, t.Context(), first), r.place(r.b, t.Context(), first)
	testinfra.WaitFor(t, "ann's retries to wait for her batch", func() bool {
		n, _ := r.ba.w.skus.Queued(r.sku)
		return (n == 1 || len(same) > 0) && (r.running(t, "UPDATE stock_items%") || len(other) > 0)
	})
	if err := blocker.Rollback().Error; err != nil {
		t.Fatal(err)
	}
	if a := <-bob; a.Err != nil {
		t.Fatalf("bob: %v", a.Err)
	}
	want := r.orderOf(t, first)
	for name, got := range map[string]chan order.Answer{"on the same instance": same, "on another": other} {
		if a := <-got; a.Err != nil || a.Order.ID != want {
			t.Errorf("ann's retry %s: order %d, %v; want her order %d", name, a.Order.ID, a.Err, want)
		}
	}
}

// TestBatchedBusyBuyerTakesNothingLater: a buyer answered busy while its
// request waited for a batch asks again on another instance, and is told
// sold out, which that instance keeps as the key's answer. A unit then
// comes back, before the first request's batch decides. That batch must
// not give the unit to the buyer who left: the key would have an order
// and be answered sold out. It goes to the buyer behind, who still waits.
func TestBatchedBusyBuyerTakesNothingLater(t *testing.T) {
	t.Parallel()
	r := newRetrySale(t, 3)
	first := order.PlaceRequest{SKU: r.sku, UserID: "ann", Quantity: 1, IdempotencyKey: "ann-1"}
	annCtx, annGone := context.WithCancel(t.Context())
	ann, bob := r.queueBehind(t, call{annCtx, first}, call{t.Context(), r.buyer("bob")})
	annGone()
	if a := <-ann; !errors.Is(a.Err, stock.ErrBusy) {
		t.Fatalf("ann, gone while she waits for a batch: %+v, want busy", a)
	}
	r.pause.armed.Store(true) // the batch of ann and bob waits before its first statement
	r.pause.release <- struct{}{}
	<-r.pause.at

	ctx := t.Context()
	var cat order.Order
	for _, user := range []string{"cat", "dan"} {
		if a := <-r.place(r.b, ctx, r.buyer(user)); a.Err != nil {
			t.Fatalf("%s, on the other instance: %v", user, a.Err)
		} else if user == "cat" {
			cat = a.Order
		}
	}
	if a := <-r.place(r.b, ctx, first); !errors.Is(a.Err, stock.ErrSoldOut) {
		t.Fatalf("ann's retry, every unit sold: %+v, want sold out", a)
	}
	if _, _, err := r.b.Refund(ctx, cat.ID, "cat", "cat-refund"); err != nil {
		t.Fatal(err)
	}
	r.pause.release <- struct{}{}
	if a := <-bob; a.Err != nil {
		t.Errorf("bob, who waited while the unit came back: %v, want the unit", a.Err)
	}
	a := <-r.place(r.b, ctx, first)
	var orders int64
	if err := r.gdb.Model(&order.Order{}).Where("user_id = ? AND idempotency_key = ?", first.UserID, first.IdempotencyKey).Count(&orders).Error; err != nil {
		t.Fatal(err)
	}
	if orders != 0 || !errors.Is(a.Err, stock.ErrSoldOut) {
		t.Errorf("ann's key: %d orders, and asked again she is told %v; want no order, and sold out again", orders, a.Err)
	}
}

// retrySale is a SKU on sale on two instances of batched, a and b, each
// with connections of its own, on one database, with their buyers' keys
// in one Redis. The statements of a's batches that write a stock row can
// be paused.
type retrySale struct {
	sku   string
	a, b  *order.Service
	ba    *Batched
	pause *pauser
	gdb   *gorm.DB // b's
}

func newRetrySale(t *testing.T, units int) *retrySale {
	t.Helper()
	testinfra.NeedsRealServers(t, "it holds a batch on InnoDB's locks, and reads the process list")
	dsn, ns := testinfra.MySQL(t), testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: ns.Addr})
	t.Cleanup(func() { rdb.Close() })
	r := &retrySale{sku: "retried", gdb: testinfra.ShopDB(t, dsn)}
	gdbA := testinfra.OpenDB(t, dsn)
	r.pause = pauseStockWrites(t, gdbA)
	keys := &order.Options{Keys: &order.KeyOptions{Redis: rdb, Prefix: ns.Prefix}}
	r.ba = NewBatched(gdbA, order.Rules{})
	r.a = order.NewService(gdbA, r.ba.Placement(), keys)
	r.b = order.NewService(r.gdb, NewBatched(r.gdb, order.Rules{}).Placement(), keys)
	t.Cleanup(func() { r.a.Close(); r.b.Close() })
	t.Cleanup(func() { close(r.pause.stop) }) // first: a failed test may leave a batch paused
	if _, err := r.b.SetStock(t.Context(), r.sku, units); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *retrySale) buyer(user string) order.PlaceRequest {
	return order.PlaceRequest{SKU: r.sku, UserID: user, Quantity: 1, IdempotencyKey: user + "-1"}
}

// call is one request, with its ctx.
type call struct {
	ctx context.Context
	r   order.PlaceRequest
}

// place places r on shop in the background; the answer comes on the
// channel.
func (r *retrySale) place(shop *order.Service, ctx context.Context, req order.PlaceRequest) chan order.Answer {
	done := make(chan order.Answer, 1)
	go func() {
		var a order.Answer
		a.Order, a.Replayed, a.Err = shop.Place(ctx, req)
		done <- a
	}()
	return done
}

// queueBehind has a sell a unit in a batch paused before its first
// statement, queues first and second on a behind it, and returns their
// answers to come. The paused batch runs once the test sends on
// r.pause.release.
func (r *retrySale) queueBehind(t *testing.T, first, second call) (chan order.Answer, chan order.Answer) {
	t.Helper()
	r.pause.armed.Store(true)
	r.place(r.a, t.Context(), r.buyer("eve"))
	<-r.pause.at
	a := r.place(r.a, first.ctx, first.r)
	testinfra.WaitFor(t, "the first buyer to queue", func() bool { n, _ := r.ba.w.skus.Queued(r.sku); return n == 1 })
	b := r.place(r.a, second.ctx, second.r)
	testinfra.WaitFor(t, "both buyers to queue", func() bool { n, _ := r.ba.w.skus.Queued(r.sku); return n == 2 })
	return a, b
}

// running reports whether a statement LIKE pattern runs in the test's
// database.
func (r *retrySale) running(t *testing.T, pattern string) bool {
	t.Helper()
	var n int64
	if err := r.gdb.Raw(`SELECT COUNT(*) FROM information_schema.processlist WHERE db = DATABASE() AND info LIKE ?`,
		pattern).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// orderOf returns the id of the order that req's key has.
func (r *retrySale) orderOf(t *testing.T, req order.PlaceRequest) int64 {
	t.Helper()
	var o order.Order
	if err := r.gdb.Where("user_id = ? AND idempotency_key = ?", req.UserID, req.IdempotencyKey).Take(&o).Error; err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// pauser pauses the next statement that writes a stock row, once armed,
// in the goroutine that runs it: it signals at, and runs once the test
// sends on release, or the test ends (stop).
type pauser struct {
	armed             atomic.Bool
	at, release, stop chan struct{}
}

func pauseStockWrites(t *testing.T, gdb *gorm.DB) *pauser {
	t.Helper()
	p := &pauser{at: make(chan struct{}), release: make(chan struct{}), stop: make(chan struct{})}
	err := gdb.Callback().Raw().Before("gorm:raw").Register("test:pause", func(d *gorm.DB) {
		if !strings.HasPrefix(d.Statement.SQL.String(), "UPDATE stock_items") || !p.armed.CompareAndSwap(true, false) {
			return
		}
		select {
		case p.at <- struct{}{}:
		case <-p.stop:
			return
		}
		select {
		case <-p.release:
		case <-p.stop:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
