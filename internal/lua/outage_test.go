package lua_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// What lua's winners see through a database outage: their units are
// reserved in Redis, their first requests end busy, and their retries
// must get their orders soon after the database takes writes again,
// whether the shop that reserved them lives or not.

const (
	// outageDeadline is each request's, as SHOP_REQUEST_TIMEOUT sets it:
	// the outage outlasts it.
	outageDeadline = 500 * time.Millisecond
	// outageRetry is how often a buyer answered busy asks again.
	outageRetry = 100 * time.Millisecond
	// settledWithin bounds the time from the database taking writes again
	// to each winner's 201. It holds because nothing but the database
	// keeps a winner's order back: the shop that reserved it tries it
	// again with a backoff of at most a quarter of a second, and a retry
	// at another shop commits it itself, in one batch, and the buyers ask
	// every 100 ms. Before, a reservation whose commit had failed waited
	// for the claim timeout (30 s) and its buyer heard in progress
	// meanwhile.
	settledWithin = 2 * time.Second
)

// proxied sends cfg's MySQL connections through a proxy of the test's
// own, which it returns.
func proxied(t *testing.T, cfg *config.Config) *testinfra.Proxy {
	t.Helper()
	dsn, err := mysql.ParseDSN(cfg.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	p := testinfra.StartProxy(t, dsn.Addr)
	dsn.Addr = p.Addr()
	cfg.MySQLDSN = dsn.FormatDSN()
	return p
}

// TestLuaWinnersAfterDatabaseStall: MySQL stalls under three shops for
// three times a request's deadline, paused (every byte held) or cut
// (connections reset, new ones refused). Buyers who arrive meanwhile win
// their units in Redis and are answered busy. They ask again with their
// keys, each time on the next shop, and every one gets its order within
// settledWithin of MySQL taking writes again: no shop died, and none of
// them waits for the claim timeout. The orders of the winners who never
// ask again are in the database by then too: their shops persisted them.
func TestLuaWinnersAfterDatabaseStall(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it stalls the shops' connections to MySQL")
	for _, tc := range []struct {
		name          string
		stall, resume func(*testinfra.Proxy)
	}{
		{"paused", (*testinfra.Proxy).Pause, (*testinfra.Proxy).Resume},
		{"cut", (*testinfra.Proxy).Cut, (*testinfra.Proxy).Mend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var proxy *testinfra.Proxy
			f := newLuaFleet(t, func(cfg *config.Config) { proxy = proxied(t, cfg) })
			shops := []luaShop{f.new(), f.new(), f.new()}
			sku := "stall-" + tc.name
			warm := openSale(t, sku, shops...)
			tc.stall(proxy)
			winners := reserveBusy(t, sku, "winner", shops...)
			quitters := reserveBusy(t, sku, "quitter", shops...)
			acked, back := retryUntilOrdered(t, winners, shops, func() { tc.resume(proxy) })
			// Their shops persist them in a later batch: within
			// settledWithin too, for the same reason.
			n := ordersOf(t, f, sku, "quitter-%")
			for ; n < len(quitters) && time.Since(back) < settledWithin; n = ordersOf(t, f, sku, "quitter-%") {
				time.Sleep(10 * time.Millisecond)
			}
			if n != len(quitters) {
				t.Errorf("%v after the database took writes again, %d orders of the %d winners who never asked again, want all", settledWithin, n, len(quitters))
			} else {
				t.Logf("the orders of the winners who never asked again were in the database %v after the database took writes again", time.Since(back).Round(time.Millisecond))
			}
			a := f.settled(t, shops[0], sku, 0, append(warm, ids(acked)...))
			if want := len(warm) + len(winners) + len(quitters); a.Orders != want {
				t.Errorf("%d orders, want %d", a.Orders, want)
			}
		})
	}
}

// TestLuaWinnersOfDeadShop: the winners of TestLuaWinnersAfterDatabaseStall
// reserved on one shop, which dies while MySQL is out: it never persists
// their reservations. A retry on another shop persists its reservation
// itself, within settledWithin of MySQL taking writes again, and the
// reservations of buyers who never ask again are claimed once idle for the
// claim timeout and persisted by the reconciler.
func TestLuaWinnersOfDeadShop(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it cuts the shops' connections to MySQL")
	var proxy, own *testinfra.Proxy
	f := newLuaFleet(t, func(cfg *config.Config) { proxy = proxied(t, cfg) })
	live := []luaShop{f.new(), f.new()}
	dead := f.newWith(func(cfg *config.Config) { own = proxied(t, cfg) })
	const sku = "dead-shop"
	warm := openSale(t, sku, append(live, dead)...)
	proxy.Cut()
	own.Cut()
	winners := reserveBusy(t, sku, "winner", dead)
	quitters := reserveBusy(t, sku, "quitter", dead)
	dead.stop() // its reservations stay pending in the log, as a killed shop's
	acked, _ := retryUntilOrdered(t, winners, live, proxy.Mend)
	if n := ordersOf(t, f, sku, "quitter-%"); n != 0 {
		t.Errorf("%d orders of the buyers who never asked again before the claim, want none: their shop is dead", n)
	}

	claimer := f.newWith(func(cfg *config.Config) { cfg.ClaimIdle = 100 * time.Millisecond })
	time.Sleep(200 * time.Millisecond)
	rep, err := claimer.lua.Reconcile(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Claimed != len(quitters) || rep.Persisted != len(quitters) {
		t.Errorf("claimed %d, persisted %d; want the %d reservations of the buyers who never asked again", rep.Claimed, rep.Persisted, len(quitters))
	}
	for _, q := range quitters {
		if _, replayed, err := live[0].Place(t.Context(), q); err != nil || !replayed {
			t.Errorf("%s, asking at last: replayed %v, %v; want its claimed order", q.UserID, replayed, err)
		}
	}
	a := f.settled(t, live[0], sku, 0, append(warm, ids(acked)...))
	if want := len(warm) + len(winners) + len(quitters); a.Orders != want {
		t.Errorf("%d orders, want %d", a.Orders, want)
	}
}

// openSale puts 20 units of sku on sale, and has each shop sell one: each
// knows the SKU's epoch, and has its connections open. It returns the
// orders.
func openSale(t *testing.T, sku string, shops ...luaShop) []int64 {
	t.Helper()
	if _, err := shops[0].SetStock(t.Context(), sku, 20); err != nil {
		t.Fatal(err)
	}
	warm, _, others := placeAs(t, "early", sku, len(shops), shops...)
	if len(others) > 0 || len(warm) != len(shops) {
		t.Fatalf("before the outage: %v, %v", warm, others)
	}
	return warm
}

// reserveBusy has three buyers, <who>-<i>, ask for a unit of sku each, on
// the shops in turn, while the database is out: each wins it in Redis and
// is answered busy at its deadline. It returns their requests.
func reserveBusy(t *testing.T, sku, who string, shops ...luaShop) []order.PlaceRequest {
	t.Helper()
	rs := make([]order.PlaceRequest, 3)
	var wg sync.WaitGroup
	for i := range rs {
		rs[i] = order.PlaceRequest{SKU: sku, UserID: fmt.Sprint(who, "-", i), Quantity: 1, IdempotencyKey: "k"}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), outageDeadline)
			defer cancel()
			if _, _, err := shops[i%len(shops)].Place(ctx, rs[i]); !errors.Is(err, stock.ErrBusy) {
				t.Errorf("%s, while the database is out: %v, want busy", rs[i].UserID, err)
			}
		})
	}
	wg.Wait()
	return rs
}

// ordersOf counts the orders of sku whose buyers' names are like users.
func ordersOf(t *testing.T, f luaFleet, sku, users string) int {
	t.Helper()
	var n int
	if err := f.gdb.Raw(`SELECT COUNT(*) FROM orders WHERE sku = ? AND user_id LIKE ?`, sku, users).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// ordered is when a buyer got its order.
type ordered struct {
	id int64
	at time.Time
}

func ids(acked map[string]ordered) []int64 {
	var ids []int64
	for _, o := range acked {
		ids = append(ids, o.id)
	}
	return ids
}

// retryUntilOrdered has each buyer of rs ask again with its key, on the
// next shop each time, every outageRetry, until it gets its order; busy
// and in progress are asked again. A second into it, back runs: the
// database takes writes again. It returns each buyer's order and when
// back ran, and fails t for each buyer whose order came more than
// settledWithin after it, or not at all, or came not as a replay: it is
// its key's first reservation's.
func retryUntilOrdered(t *testing.T, rs []order.PlaceRequest, shops []luaShop, back func()) (map[string]ordered, time.Time) {
	t.Helper()
	var (
		mu    sync.Mutex
		acked = make(map[string]ordered)
		wg    sync.WaitGroup
	)
	giveUp := time.Now().Add(time.Second + 3*settledWithin)
	for i, r := range rs {
		wg.Go(func() {
			var last error
			for try := 1; time.Now().Before(giveUp); try++ {
				time.Sleep(outageRetry)
				ctx, cancel := context.WithTimeout(t.Context(), outageDeadline)
				o, replayed, err := shops[(i+try)%len(shops)].Place(ctx, r)
				cancel()
				switch {
				case err == nil && !replayed:
					t.Errorf("%s: its order %d answered as a new one, want a replay of its first reservation's", r.UserID, o.ID)
					return
				case err == nil:
					mu.Lock()
					acked[r.UserID] = ordered{o.ID, time.Now()}
					mu.Unlock()
					return
				case !errors.Is(err, stock.ErrBusy) && !errors.Is(err, idempotency.ErrInProgress):
					t.Errorf("%s: %v", r.UserID, err)
					return
				}
				last = err
			}
			t.Errorf("%s got no order: last %v", r.UserID, last)
		})
	}
	time.Sleep(time.Second)
	back()
	at := time.Now()
	wg.Wait()
	for _, r := range rs {
		o, ok := acked[r.UserID]
		switch after := o.at.Sub(at).Round(time.Millisecond); {
		case !ok:
		case after > settledWithin:
			t.Errorf("%s got its order %v after the database took writes again, want within %v", r.UserID, after, settledWithin)
		default:
			t.Logf("%s got its order %v after the database took writes again", r.UserID, after)
		}
	}
	return acked, at
}

// TestLuaNoSoldOutWhileUnitsInFlight: the last units of a SKU are
// reserved in Redis on a shop that then dies with MySQL out, so that their
// reservations are only logged; then Redis loses them (restarted empty). A
// buyer who asks while the units are only logged is not told sold out, but
// busy: the units may come back, and they do, to the next buyers, once the
// state is built again from the database. Told sold out, that buyer would
// have been lied to, as the history check would say: units that no order
// held were sold after the refusal.
func TestLuaNoSoldOutWhileUnitsInFlight(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it cuts the shops' connections to MySQL")
	var proxy, own *testinfra.Proxy
	f := newLuaFleet(t, func(cfg *config.Config) { proxy = proxied(t, cfg) })
	live := f.new()
	dead := f.newWith(func(cfg *config.Config) { own = proxied(t, cfg) })
	const sku = "in-flight"
	if _, err := live.SetStock(t.Context(), sku, 5); err != nil {
		t.Fatal(err)
	}
	early, _, others := placeAs(t, "early", sku, 2, live, dead)
	if len(early) != 2 {
		t.Fatalf("before the outage: %v, %v", early, others)
	}
	proxy.Cut()
	own.Cut()
	winners := reserveBusy(t, sku, "winner", dead) // the last three units
	dead.stop()
	ask := func(user string) error {
		ctx, cancel := context.WithTimeout(t.Context(), outageDeadline)
		defer cancel()
		_, _, err := live.Place(ctx, order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: "k"})
		return err
	}
	if err := ask("late"); !errors.Is(err, stock.ErrBusy) {
		t.Errorf("a buyer while the last units are only reserved: %v, want busy", err)
	}
	keys, err := f.rdb.Keys(t.Context(), "*{"+sku+"}*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no keys of %s in Redis to delete: %v", sku, err)
	}
	if err := f.rdb.Del(t.Context(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.Mend()
	// Its first requests may be answered busy while the state is built
	// again from the database, which on a loaded machine outlasts a
	// request's deadline; a buyer answered busy asks again.
	err = ask("later")
	for giveUp := time.Now().Add(3 * settledWithin); errors.Is(err, stock.ErrBusy) && time.Now().Before(giveUp); {
		time.Sleep(outageRetry)
		err = ask("later")
	}
	if err != nil {
		t.Errorf("a buyer once the units came back: %v, want its order", err)
	}
	// The winners whose reservations Redis lost ask again: two units are
	// left for the three of them.
	acked, soldOut, others := placeUsers(t, sku, []string{winners[0].UserID, winners[1].UserID, winners[2].UserID}, live)
	if len(acked) != 2 || soldOut != 1 {
		t.Errorf("the winners asking again: %d orders, %d sold out, %v; want 2 and 1", len(acked), soldOut, others)
	}
}
