package lua_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/lua/redisstock"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// TestLuaRebuildsEmptyRedis: with a SKU's Redis keys gone mid-sale, as
// after a restart of Redis, the next buyer's reservation finds no state,
// and the state is built again from the database before anything sells:
// what the database had sold stays sold.
func TestLuaRebuildsEmptyRedis(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, nil)
	a, b := f.new(), f.new()
	const sku = "flushed"
	if _, err := a.SetStock(t.Context(), sku, 30); err != nil {
		t.Fatal(err)
	}
	first, _, others := place(t, sku, 20, a, b)
	if len(others) > 0 {
		t.Fatal(others)
	}
	keys, err := f.rdb.Keys(t.Context(), "*{"+sku+"}*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no keys of %s in Redis to delete: %v", sku, err)
	}
	if err := f.rdb.Del(t.Context(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if got := f.redisAvailable(t, sku); got != -1 {
		t.Fatalf("redis still has a state: %d", got)
	}
	// New buyers: user-0 … user-39 again, so the first 20 are replays.
	acked, soldOut, others := place(t, sku, 40, a, b)
	if len(others) > 0 {
		t.Fatalf("%d buyers failed; first: %v", len(others), others[0])
	}
	if len(acked) != 30 || soldOut != 10 {
		t.Errorf("%d answered with an order, %d sold out; want 30 and 10", len(acked), soldOut)
	}
	a2 := f.settled(t, a, sku, soldOut, append(first, acked...))
	if a2.Orders != 30 {
		t.Errorf("%d orders, want 30", a2.Orders)
	}
}

// TestLuaClaimsDeadReservations: a process that reserved and died before
// persisting leaves its reservations pending in the stream. Reconcile on
// another instance claims them once idle and persists them, and the
// buyer's retry under the same key gets that order.
func TestLuaClaimsDeadReservations(t *testing.T) {
	t.Parallel()
	const idle = 200 * time.Millisecond
	f := newLuaFleet(t, func(cfg *config.Config) { cfg.ClaimIdle = idle })
	live := f.new()
	const sku = "orphans"
	if _, err := live.SetStock(t.Context(), sku, 10); err != nil {
		t.Fatal(err)
	}
	if _, _, others := place(t, sku, 1, live); len(others) > 0 { // builds the state
		t.Fatal(others)
	}
	var epoch int64
	if err := f.gdb.Raw(`SELECT epoch FROM stock_epochs WHERE sku = ?`, sku).Scan(&epoch).Error; err != nil {
		t.Fatal(err)
	}
	// Another process's consumer: the Redis half of lua alone, which
	// reserves and never persists, as a process that died would.
	dead := redisstock.New(f.rdb, f.prefix)
	for i := range 3 {
		r := redisstock.Reservation{UserID: fmt.Sprint("ghost-", i), Key: "g", Quantity: 1}
		if _, _, err := dead.Reserve(t.Context(), sku, r, redisstock.Terms{Epoch: epoch}); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.redisAvailable(t, sku); got != 6 {
		t.Fatalf("redis has %d, want 6 with 3 reservations pending", got)
	}
	time.Sleep(2 * idle)
	rep, err := live.lua.Reconcile(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Claimed != 3 || rep.Persisted != 3 {
		t.Errorf("claimed %d, persisted %d; want 3 and 3", rep.Claimed, rep.Persisted)
	}
	o, replayed, err := live.Place(t.Context(), order.PlaceRequest{SKU: sku, UserID: "ghost-1", Quantity: 1, IdempotencyKey: "g"})
	if err != nil || !replayed {
		t.Fatalf("the buyer's retry: %+v, replayed %v, %v; want its order replayed", o, replayed, err)
	}
	a := f.settled(t, live, sku, 0, []int64{o.ID})
	if a.Orders != 4 || a.Available != 6 {
		t.Errorf("%d orders, %d available; want 4 and 6", a.Orders, a.Available)
	}
}

// TestLuaReconcileFenced: a reconcile run whose token is below a later
// run's (its lease was lost, and another holder ran since) changes no
// state.
func TestLuaReconcileFenced(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, nil)
	a := f.new()
	const sku = "fenced"
	if _, err := a.SetStock(t.Context(), sku, 5); err != nil {
		t.Fatal(err)
	}
	if _, _, others := place(t, sku, 1, a); len(others) > 0 {
		t.Fatal(others)
	}
	if _, err := a.lua.Reconcile(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	if err := f.gdb.Exec(`UPDATE stock_items SET available = 2 WHERE sku = ?`, sku).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := a.lua.Reconcile(t.Context(), 6); !errors.Is(err, stock.ErrFenced) {
		t.Fatalf("a run with an older token: %v, want fenced", err)
	}
	if got := f.redisAvailable(t, sku); got != 4 {
		t.Errorf("redis has %d after the fenced run, want 4 as before", got)
	}
	if _, err := a.lua.Reconcile(t.Context(), 8); err != nil {
		t.Fatal(err)
	}
	if got := f.redisAvailable(t, sku); got != 2 {
		t.Errorf("redis has %d after a later run, want the database's 2", got)
	}
}

// TestLuaRebuildOutwaitsRowLockTimeout: a rebuild queued on the stock row
// behind a long transaction meets the server's lock wait timeout (here 1
// s, error 1205) before its caller's deadline; it tries again, and the
// buyer whose order needed it gets the order, not a busy answer.
func TestLuaRebuildOutwaitsRowLockTimeout(t *testing.T) {
	t.Parallel()
	f := newLuaFleet(t, func(cfg *config.Config) { cfg.MySQLDSN += "&innodb_lock_wait_timeout=1" })
	a := f.new()
	const sku = "queued"
	if _, err := a.SetStock(t.Context(), sku, 10); err != nil {
		t.Fatal(err)
	}
	if _, _, others := place(t, sku, 1, a); len(others) > 0 {
		t.Fatal(others)
	}
	// Redis loses the state: the next order rebuilds it from the database.
	if keys, err := f.rdb.Keys(t.Context(), "*{"+sku+"}*").Result(); err != nil || len(keys) == 0 {
		t.Fatalf("no keys of %s in Redis to delete: %v", sku, err)
	} else if err := f.rdb.Del(t.Context(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
	tx := f.gdb.Begin()
	if err := tx.Exec("SELECT available FROM stock_items WHERE sku = ? FOR UPDATE", sku).Error; err != nil {
		t.Fatal(err)
	}
	held := time.AfterFunc(2500*time.Millisecond, func() { tx.Rollback() }) // two timeouts' worth
	defer func() {
		if held.Stop() { // the test ended first
			tx.Rollback()
		}
	}()
	acked, soldOut, others := placeAs(t, "late", sku, 1, a)
	if len(others) > 0 || len(acked) != 1 || soldOut != 0 {
		t.Fatalf("acked %v, %d sold out, errors %v; want one order", acked, soldOut, others)
	}
}

// TestLuaPendingPastTheStock: reservations in the log that the database
// can no longer take (here the stock is cut to 0 while three of a dead
// process's are pending, as after a failover whose settlements were lost
// and whose replays gave their units back) leave the SKU sold out, not in
// doubt. A rebuild sets Redis to the database's stock less what is
// pending, below zero if need be: left at zero, the three units in the log
// would keep every buyer short of units waiting, busy, until they settle,
// and once they settle, refused, come back as units that the database
// does not have. With one bucket and with three.
func TestLuaPendingPastTheStock(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n, "-buckets"), func(t *testing.T) {
			t.Parallel()
			f := newLuaFleet(t, func(cfg *config.Config) { cfg.SKUBuckets = n })
			live := f.new() // its claim timeout, 30 s, leaves the dead one's reservations be
			const sku = "cut"
			if _, err := live.SetStock(t.Context(), sku, 3); err != nil {
				t.Fatal(err)
			}
			if _, err := live.lua.Reconcile(t.Context(), 0); err != nil { // builds the state
				t.Fatal(err)
			}
			var epoch int64
			if err := f.gdb.Raw(`SELECT epoch FROM stock_epochs WHERE sku = ?`, sku).Scan(&epoch).Error; err != nil {
				t.Fatal(err)
			}
			dead := redisstock.New(f.rdb, f.prefix) // reserves and never persists
			for i := range 3 {
				r := redisstock.Reservation{UserID: fmt.Sprint("ghost-", i), Key: "g", Quantity: 1}
				if _, _, err := dead.Reserve(t.Context(), redisstock.BucketOf(sku, 0), r, redisstock.Terms{Epoch: epoch}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := live.SetStock(t.Context(), sku, 0); err != nil {
				t.Fatal(err)
			}
			rep, err := live.lua.Reconcile(t.Context(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if s := rep.SKUs[0]; s.Database != 0 || s.Pending != 3 || s.After != -3 || s.Before == nil {
				t.Errorf("reconciled %v; want database 0, pending 3, redis -3, from the state it had", s)
			}
			ask := func(user string) error {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				_, _, err := live.Place(ctx, order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: "k"})
				return err
			}
			if err := ask("early"); !errors.Is(err, stock.ErrSoldOut) {
				t.Errorf("a buyer while three reservations that the database cannot take are pending: %v, want sold out", err)
			}
			// Another shop claims them: the database refuses them, and
			// their units leave the log without coming back.
			claimer := f.newWith(func(cfg *config.Config) { cfg.ClaimIdle = 100 * time.Millisecond })
			time.Sleep(200 * time.Millisecond)
			if rep, err := claimer.lua.Reconcile(t.Context(), 0); err != nil || rep.Claimed != 3 || rep.Persisted != 0 {
				t.Fatalf("the claim: %+v, %v; want 3 claimed, none persisted", rep, err)
			}
			available, pending := 0, 0
			for b := range n {
				st, err := f.stock.State(t.Context(), redisstock.BucketOf(sku, b))
				if err != nil {
					t.Fatal(err)
				}
				available, pending = available+st.Available, pending+len(st.Log)
			}
			if available != 0 || pending != 0 {
				t.Errorf("once the claim settled them: redis %d, %d pending; want 0 and 0", available, pending)
			}
			if err := ask("late"); !errors.Is(err, stock.ErrSoldOut) {
				t.Errorf("a buyer once they settled: %v, want sold out", err)
			}
		})
	}
}
