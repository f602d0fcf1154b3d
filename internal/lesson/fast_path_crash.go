package lesson

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/shop/internal/lua/redisstock"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/lua"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// The buyers of fast-path-crash, and how many of them the process answers
// and records before it dies.
const (
	fastBuyers   = 10
	fastRecorded = 4
	fastIdle     = 200 * time.Millisecond // lua's claim timeout here
)

// decrement is the fast path's check-and-take of a Redis counter.
var decrement = redis.NewScript(`
if tonumber(redis.call("GET", KEYS[1]) or "0") < 1 then return 0 end
redis.call("DECR", KEYS[1])
return 1`)

func init() {
	register(Lesson{Number: 12, Name: "fast-path-crash", Seed: "seed 002",
		Claim:    "the flash sale (秒杀) as many shops build it: take the stock in Redis and answer at once; a queue writes the order to the database behind it",
		Setup:    fmt.Sprintf("%d buyers for %d units; the process records %d orders, then dies (kill -9) with the rest still in memory", fastBuyers, fastBuyers, fastRecorded),
		Takeaway: "an order is acknowledged only once it is in the database, and the reservation waits in a Redis Stream that another instance claims and persists if its process dies (the lua strategy)",
		Mistake:  fastPathQueue,
		Fix:      fastPathLua,
	})
}

// fastPathQueue: DECR, answer, queue the order in memory; the process dies
// with the queue unwritten.
func fastPathQueue(ctx context.Context, env *Env) (Trial, error) {
	sku, err := onSale(ctx, env, "fast-path-crash-mistake", fastBuyers)
	if err != nil {
		return Trial{}, err
	}
	counter := env.Prefix + "fast-path-crash:stock"
	defer env.Redis.Del(context.WithoutCancel(ctx), counter)
	if err := env.Redis.Set(ctx, counter, fastBuyers, 0).Err(); err != nil {
		return Trial{}, err
	}
	var queue []string // the orders acknowledged and not yet written
	acked := 0
	for i := range fastBuyers {
		took, err := decrement.Run(ctx, env.Redis, []string{counter}).Int()
		if err != nil {
			return Trial{}, err
		}
		if took == 1 {
			acked++ // "201 Created": the buyer is told it bought
			queue = append(queue, fmt.Sprint("buyer-", i))
		}
	}
	for _, buyer := range queue[:fastRecorded] { // the writer drains part of the queue...
		if err := stock.NewAtomic(env.DB).Adjust(ctx, sku, -1, ordered(sku, buyer)); err != nil {
			return Trial{}, err
		}
	}
	// ...and the process dies: the rest of the queue is gone.
	left, err := env.Redis.Get(ctx, counter).Int()
	if err != nil {
		return Trial{}, err
	}
	return crashTrial(ctx, env, sku, "DECR in Redis, answer, then write from an in-memory queue", acked, left)
}

// fastPathLua: the lua strategy. The process records some orders, then dies
// with the rest reserved in Redis and pending in its stream; another
// instance's reconcile claims and persists them.
func fastPathLua(ctx context.Context, env *Env) (Trial, error) {
	sku := env.Prefix + "fast-path-crash-fix"
	opts := &lua.Options{Prefix: env.Prefix + "lua:", ClaimIdle: fastIdle}
	dying := order.NewService(env.DB, lua.New(env.DB, env.Redis, opts).Placement(), nil)
	// A sale from nothing: what an earlier run of the lesson left goes.
	if err := dying.DeleteStock(ctx, sku); err != nil && !errors.Is(err, stock.ErrNotFound) {
		return Trial{}, err
	}
	if _, err := dying.SetStock(ctx, sku, fastBuyers); err != nil {
		return Trial{}, err
	}
	acked := 0
	for i := range fastRecorded {
		if _, _, err := dying.Place(ctx, order.PlaceRequest{SKU: sku, UserID: fmt.Sprint("buyer-", i), Quantity: 1, IdempotencyKey: "k"}); err != nil {
			return Trial{}, err
		}
		acked++ // answered 201 only after its batch committed
	}
	// The dying process runs its script for the rest, and is killed
	// before their batch commits: nobody is answered, the reservations
	// wait in the stream.
	var epoch int64
	if err := env.DB.WithContext(ctx).Raw(`SELECT COALESCE(MAX(epoch), 0) FROM stock_epochs WHERE sku = ?`, sku).Row().Scan(&epoch); err != nil {
		return Trial{}, err
	}
	reserving := redisstock.New(env.Redis, opts.Prefix)
	for i := fastRecorded; i < fastBuyers; i++ {
		r := redisstock.Reservation{UserID: fmt.Sprint("buyer-", i), Key: "k", Quantity: 1}
		if _, _, err := reserving.Reserve(ctx, sku, r, redisstock.Terms{Epoch: epoch}); err != nil {
			return Trial{}, err
		}
	}
	// Another instance's reconcile, once the reservations have been idle
	// past the claim timeout.
	time.Sleep(fastIdle + 50*time.Millisecond)
	env.Advance(fastIdle + 50*time.Millisecond)
	if _, err := lua.New(env.DB, env.Redis, opts).Reconcile(ctx, 0); err != nil {
		return Trial{}, err
	}
	st, err := reserving.State(ctx, sku)
	if err != nil {
		return Trial{}, err
	}
	return crashTrial(ctx, env, sku, "the lua strategy: reserve and log in one script, answer after the commit, claim what a dead process left", acked, st.Available)
}

func crashTrial(ctx context.Context, env *Env, sku, name string, acked, redisLeft int) (Trial, error) {
	a, err := audit.SKU(ctx, env.DB, sku, 0, nil)
	if err != nil {
		return Trial{}, err
	}
	lost := max(acked-a.Orders, 0)
	return Trial{Name: name,
		Numbers: map[string]int64{"acknowledged": int64(acked), "orders": int64(a.Orders), "lost": int64(lost),
			"redis_available": int64(redisLeft), "database_available": int64(a.Available)},
		Happened: fmt.Sprintf("%d buyers told they bought, %d orders in the database (%d lost); Redis has %d left, the database %d",
			acked, a.Orders, lost, redisLeft, a.Available),
		Failed: lost > 0 || redisLeft != a.Available}, nil
}
