package lesson

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/loadtest"
)

// The starvation sale: starveBuyers buyers arrive starveEvery apart for
// starveStock units; each winner holds the lock for starveHold, as an
// order's transaction would; a buyer who finds the lock taken tries again
// after starveRetry, fixed or on average.
const (
	starveBuyers = 40
	starveStock  = 10
	starveEvery  = 3 * time.Millisecond
	starveHold   = 8 * time.Millisecond
	starveRetry  = 20 * time.Millisecond
)

func init() {
	register(Lesson{Number: 16, Name: "starvation", Seed: "seed 000",
		Claim: "every contender retries the database lock at the same fixed interval, so one that came early can keep losing to later ones (饥饿); a random wait is fairer",
		Setup: fmt.Sprintf("%d buyers arrive %s apart for %d units behind one lock in the lock service's store; a winner holds it %s; a waiter retries every %s, or after a random wait of %s on average, or takes a ticket and is served in arrival order",
			starveBuyers, starveEvery, starveStock, starveHold, starveRetry, starveRetry),
		Takeaway: "queue waiters in arrival order, as ZooKeeper's sequential nodes and lock.ZooKeeper do, where who is served first matters; a random wait only spreads the retries",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			fixed, err := starve(ctx, env, "fixed", retryEvery(func() time.Duration { return starveRetry }))
			if err != nil {
				return Trial{}, err
			}
			jittered, err := starve(ctx, env, "jittered", retryEvery(func() time.Duration { return rand.N(2 * starveRetry) }))
			if err != nil {
				return Trial{}, err
			}
			return starveTrial("a fixed retry interval, then a random wait", way{"fixed interval", "fixed", fixed}, way{"random wait", "jittered", jittered}), nil
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			queued, err := starve(ctx, env, "queue", ticketQueue)
			if err != nil {
				return Trial{}, err
			}
			return starveTrial("a queue in arrival order", way{"arrival queue", "queue", queued}), nil
		},
	})
}

// waitFunc takes the lock of sale for buyer rank, waiting as it does. It
// reports when the lock service's store took the buyer's first request,
// by the store's clock: the order in which the store saw the buyers is
// the order in which they came, however late a loaded machine ran the
// goroutine that measured it.
type waitFunc func(ctx context.Context, c *redis.Client, sale string, rank int) (release func() error, arrived time.Time, err error)

// stamped runs cmd in one transaction after TIME, and returns the store's
// clock when it ran.
func stamped[T redis.Cmder](ctx context.Context, c *redis.Client, cmd func(redis.Pipeliner) T) (time.Time, T, error) {
	var (
		now *redis.TimeCmd
		out T
	)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now, out = p.Time(ctx), cmd(p)
		return nil
	})
	if err != nil {
		return time.Time{}, out, err
	}
	return now.Val(), out, nil
}

// retryEvery tries the lock, SET NX, and after each failure waits next().
func retryEvery(next func() time.Duration) waitFunc {
	return func(ctx context.Context, c *redis.Client, sale string, rank int) (func() error, time.Time, error) {
		setNX := func(p redis.Cmdable) *redis.BoolCmd { return p.SetNX(ctx, sale+"lock", rank, time.Minute) }
		arrived, first, err := stamped(ctx, c, func(p redis.Pipeliner) *redis.BoolCmd { return setNX(p) })
		for ok := first.Val(); err == nil && !ok; ok, err = setNX(c).Result() {
			select {
			case <-time.After(next()):
			case <-ctx.Done():
				return nil, arrived, ctx.Err()
			}
		}
		return func() error { return c.Del(context.WithoutCancel(ctx), sale+"lock").Err() }, arrived, err
	}
}

// ticketQueue takes a ticket on arrival (INCR) and waits until every
// ticket before it is served: a queue in arrival order, as a lock
// service's sequential nodes give.
func ticketQueue(ctx context.Context, c *redis.Client, sale string, _ int) (func() error, time.Time, error) {
	arrived, incr, err := stamped(ctx, c, func(p redis.Pipeliner) *redis.IntCmd { return p.Incr(ctx, sale+"tickets") })
	if err != nil {
		return nil, arrived, err
	}
	for ticket := incr.Val(); ; {
		served, err := c.Get(ctx, sale+"served").Int64()
		if err != nil && err != redis.Nil {
			return nil, arrived, err
		}
		if served == ticket-1 {
			return func() error { return c.Incr(context.WithoutCancel(ctx), sale+"served").Err() }, arrived, nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return nil, arrived, ctx.Err()
		}
	}
}

// starve runs the sale with wait, and measures from the winners the lock
// service recorded whom it served.
func starve(ctx context.Context, env *Env, way string, wait waitFunc) (loadtest.Fairness, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, sale := env.Redis, env.Prefix+"starvation:"+way+":"
	if err := c.Set(ctx, sale+"stock", starveStock, time.Hour).Err(); err != nil {
		return loadtest.Fairness{}, err
	}
	defer c.Del(context.WithoutCancel(ctx), sale+"stock", sale+"winners", sale+"tickets", sale+"served", sale+"lock")
	// A buyer arrives when the store took its first request, not when it
	// was due: on a loaded machine a goroutine may wake, or its request
	// reach the store, later than one due after it, and the queue rightly
	// serves the one that came first.
	opened, err := c.Time(ctx).Result()
	if err != nil {
		return loadtest.Fairness{}, err
	}
	arrivals := make([]loadtest.Arrival, starveBuyers)
	errs := make([]error, starveBuyers)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range arrivals {
		due := time.Duration(i) * starveEvery
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(due)))
			asked := time.Now()
			arrived, err := buy(ctx, c, sale, i+1, wait)
			sent := arrived.Sub(opened)
			errs[i], arrivals[i] = err, loadtest.Arrival{Rank: i + 1, Sent: sent, Answered: sent + time.Since(asked), Outcome: loadtest.SoldOut}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return loadtest.Fairness{}, err
		}
	}
	// Who won is what the lock service's store says.
	winners, err := c.LRange(ctx, sale+"winners", 0, -1).Result()
	if err != nil {
		return loadtest.Fairness{}, err
	}
	for _, w := range winners {
		rank, err := strconv.Atoi(w)
		if err != nil || rank < 1 || rank > starveBuyers {
			return loadtest.Fairness{}, fmt.Errorf("starvation: winner %q", w)
		}
		arrivals[rank-1].Outcome = loadtest.Ordered
	}
	return loadtest.Fair(arrivals, loadtest.DefaultOvertakeGap), nil
}

// buy takes the lock, takes a unit if one is left and records the buyer
// as a winner, holds the lock as an order's transaction would, and
// releases it. It returns when the store saw the buyer arrive.
func buy(ctx context.Context, c *redis.Client, sale string, rank int, wait waitFunc) (arrived time.Time, err error) {
	release, arrived, err := wait(ctx, c, sale, rank)
	if err != nil {
		return arrived, err
	}
	left, err := c.Get(ctx, sale+"stock").Int()
	if err == nil && left > 0 {
		_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Decr(ctx, sale+"stock")
			p.RPush(ctx, sale+"winners", rank)
			return nil
		})
		time.Sleep(starveHold)
	}
	if rerr := release(); err == nil {
		err = rerr
	}
	return arrived, err
}

// way is one way of waiting and what it came to.
type way struct {
	label, key string
	fair       loadtest.Fairness
}

// starveTrial is the trial of one or more ways of waiting: a row of
// figures each, and failed if the first let a later buyer overtake an
// earlier one.
func starveTrial(name string, ways ...way) Trial {
	t := Trial{Name: name, Numbers: map[string]int64{}}
	for _, w := range ways {
		f := w.fair
		t.Numbers[w.key+"_first_come_x100"] = int64(f.FirstComeShare * 100)
		t.Numbers[w.key+"_overtakes_per_1000"] = int64(f.OvertakesPer1000)
		t.Numbers[w.key+"_latest_winner"] = int64(f.LatestWinnerRank)
		t.Numbers[w.key+"_longest_wait_ms"] = int64(f.LongestWaitMS)
		t.Rows = append(t.Rows, fmt.Sprintf("%-14s  first come %.2f  overtakes/1000 %6.0f  latest winner %2d  longest wait %4.0f ms",
			w.label, f.FirstComeShare, f.OvertakesPer1000, f.LatestWinnerRank, f.LongestWaitMS))
	}
	first := ways[0].fair
	// Buyers closer than the overtake gap count as simultaneous: the
	// scheduler may take them in either order.
	t.Failed = first.Overtakes > 0
	switch {
	case len(ways) == 1 && t.Failed:
		t.Happened = "the queue served a buyer out of turn"
	case len(ways) == 1:
		t.Happened = "the queue served the first comers first: no overtake"
	case t.Failed:
		than := "fewer, as the seed says"
		if ways[1].fair.Overtakes >= first.Overtakes {
			than = "no fewer: the seed's random wait did not help this run"
		}
		t.Happened = fmt.Sprintf("with a fixed interval, later buyers overtook earlier ones %d times; with a random wait, %d times, %s", first.Overtakes, ways[1].fair.Overtakes, than)
	default:
		t.Happened = "the fixed interval served every buyer in turn: no less fair than the queue this run"
	}
	return t
}
