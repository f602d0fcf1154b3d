package lua

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/stockguard/shop/internal/groupcommit"
	"github.com/stockguard/shop/internal/lua/redisstock"
	"github.com/stockguard/shop/internal/order"

	"github.com/stockguard/shop/internal/backoff"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// A cart under lua: Redis takes every line's stock first, then the
// group-commit writer records the cart in a batch of carts (internal/
// groupcommit, carts.go), whose conditional UPDATEs refuse rather than
// oversell, and which refuses, busy, a cart a line of which was reserved
// in a sale of another epoch. Once the batch has ended, its carts'
// reservations end (settleCarts): done, or given back. When the lines' keys
// share one hash slot (one Redis server, or SKUs of one sale tag on a
// cluster), one script reserves them all or none. Otherwise the cart is a
// saga: each line is reserved by a script on its own master, in ascending
// SKU order, and when one is refused, the lines reserved so far are given
// back. A barrier per saga and line makes each give-back exactly once,
// lets a give-back that overtakes its reservation block it, and ignores
// duplicates (stock/give.lua). A reservation whose shop dies mid-saga is
// pending in its SKU's log: the reconciler gives it back once it has been
// idle for the claim timeout. See docs/orders.md#carts.

// PlaceCart implements CartPlacer: Redis first, then the database, then
// the reservations end: done, or given back.
func (l *Lua) PlaceCart(ctx context.Context, r order.PlaceRequest) (order.Order, bool, error) {
	// A retry of a cart the database has reserves again: its batch finds
	// the key's order (the INSERT fails on the unique index, and the batch
	// runs again with the keys looked up), replays it, and the saga gives
	// the reservations back; one Redis refuses finds it too (ReplayOr).
	doubts := 0
	for attempt := 0; ; attempt++ {
		c := redisstock.Cart{UserID: r.UserID, Key: r.IdempotencyKey, Saga: rand.Text(), Limit: l.rules.Limit}
		held, epochs, err := l.reserveCart(ctx, c, r.Items)
		var line *redisstock.LineError
		var over *redisstock.OverLimitError
		switch {
		case err == nil:
			// The writer ends the reservations once the batch has ended
			// (settleCarts), even should the buyer stop waiting.
			o, replayed, err := l.w.SubmitCart(&groupcommit.Request[reservation]{Ctx: ctx, Order: r, Epochs: epochs,
				Meta: reservation{saga: c.Saga, held: held}})
			if errors.Is(err, stock.ErrSoldOut) || errors.Is(err, order.ErrLimitReached) {
				// The stock may have gone to this key's own order.
				return order.ReplayOr(ctx, l.db, r, err)
			}
			return o, replayed, err
		case errors.As(err, &line) && errors.Is(err, redisstock.ErrStale) && attempt < len(r.Items)+2:
			// Each line's state may need building again (a Redis restarted
			// empty mid-saga): the saga starts over, with a new barrier.
			seen, _ := l.epoch(ctx, line.SKU)
			if err := l.refresh(ctx, line.SKU, seen); errors.Is(err, stock.ErrNotFound) {
				return order.Order{}, false, order.NotFound(line.SKU)
			} else if err != nil {
				return order.Order{}, false, fmt.Errorf("order: place: %w", err)
			}
		case errors.Is(err, redisstock.ErrInDoubt):
			if err := waitOutDoubt(ctx, &doubts); err != nil {
				return order.Order{}, false, err
			}
			attempt--
		case errors.Is(err, stock.ErrSoldOut):
			// The stock may have gone to this key's own order, placed by a
			// request still in flight when this one looked.
			return order.ReplayOr(ctx, l.db, r, order.AsRefusal(err))
		case errors.As(err, &line) && errors.As(err, &over):
			return order.ReplayOr(ctx, l.db, r, order.LimitReached(r.UserID, line.SKU, over.Held, l.rules.Limit))
		default: // Redis is down, or the state keeps changing: nothing is held
			return order.Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, err)
		}
	}
}

// waitOutDoubt pauses a buyer short of units that reservations in flight
// hold, and may give back (redisstock.ErrInDoubt): rather than answer sold
// out while stock may be left, it asks again shortly, and is busy when its
// ctx ends first.
func waitOutDoubt(ctx context.Context, doubts *int) error {
	if err := backoff.Wait(ctx, *doubts); err != nil {
		return fmt.Errorf("order: place: %w: %w", stock.ErrBusy, err)
	}
	*doubts++
	return nil
}

// reserveCart reserves the cart's lines in Redis: in one script when
// their keys share a hash slot, else as a saga, which gives back what it
// holds when a line is refused; with buckets, always a saga, each line
// from the first of its SKU's buckets that has it. It returns the buckets
// that hold the lines (with one bucket, the SKUs), and the epoch of each
// line's reservation; on error it holds nothing.
func (l *Lua) reserveCart(ctx context.Context, c redisstock.Cart, items []order.Line) ([]string, []int64, error) {
	lines := make([]redisstock.CartLine, len(items))
	skus := make([]string, len(items))
	epochs := make([]int64, len(items))
	for i, it := range items {
		epoch, err := l.epoch(ctx, it.SKU)
		if err != nil {
			return nil, nil, err
		}
		lines[i], skus[i], epochs[i] = redisstock.CartLine{SKU: it.SKU, Epoch: epoch, Quantity: it.Quantity}, it.SKU, epoch
	}
	if l.buckets == 1 && l.redis.SameSlot(skus) {
		if _, err := l.redis.ReserveCart(ctx, c, lines); err != nil {
			return nil, nil, err
		}
		return skus, epochs, nil
	}
	held, err := l.reserveSaga(ctx, c, lines)
	return held, epochs, err
}

// reserveSaga reserves the lines of a saga, one after another, and gives
// back what it holds when one is refused.
func (l *Lua) reserveSaga(ctx context.Context, c redisstock.Cart, lines []redisstock.CartLine) ([]string, error) {
	var held []string // the buckets that hold a line
	for i, line := range lines {
		if l.hooks.betweenLines != nil {
			l.hooks.betweenLines(i)
		}
		bucket, err := l.reserveInTurn(ctx, c, line)
		if err == nil {
			held = append(held, bucket)
			continue
		}
		// Give back what is held, and, unless Redis refused it, this line
		// too: its script may have run, and if it has not, the barrier
		// refuses it should it run late.
		var refused *redisstock.LineError
		var short *stock.ShortError
		if bucket != "" && !errors.As(err, &refused) && !errors.As(err, &short) {
			held = append(held, bucket)
		}
		l.endCart(c.Saga, held, false)
		if short != nil && !errors.Is(err, redisstock.ErrInDoubt) {
			more, doubt := l.alsoShort(ctx, lines[i+1:])
			short.SKUs = append(short.SKUs, more...)
			if doubt {
				return nil, fmt.Errorf("%w: %w", redisstock.ErrInDoubt, short)
			}
		}
		return nil, err
	}
	return held, nil
}

// reserveInTurn reserves one line of a saga, and while the line is in
// doubt (its units held by reservations in flight, which may give them
// back), waits and asks again, keeping the lines the saga holds. Sagas
// take their lines in ascending SKU order, so the units a saga waits for
// are held by sagas that wait, if at all, only for lines after this one:
// the saga that waits for the last line waits on no other saga, and none
// waits in a cycle. (A saga that gave back everything it held on a doubt
// could keep two sagas each in doubt of the other's units, and a busy
// machine kept them so until their buyers' deadlines.) When the buyer's
// ctx ends first, nothing is held for the line: it returns no bucket,
// and busy.
func (l *Lua) reserveInTurn(ctx context.Context, c redisstock.Cart, line redisstock.CartLine) (string, error) {
	for doubts := 0; ; {
		bucket, err := l.reserveLine(ctx, c, line)
		if !errors.Is(err, redisstock.ErrInDoubt) {
			return bucket, err
		}
		if err := waitOutDoubt(ctx, &doubts); err != nil {
			return "", err
		}
	}
}

// reserveLine reserves one line of a saga in the first of its SKU's
// buckets, in the buyer's route, that has the units, and returns that
// bucket, or the one that failed. A line short in every bucket is short;
// in doubt (redisstock.ErrInDoubt) if it was in doubt in any.
func (l *Lua) reserveLine(ctx context.Context, c redisstock.Cart, line redisstock.CartLine) (string, error) {
	sku := line.SKU
	var doubt error
	for _, bucket := range l.route(sku, c.UserID) {
		line.SKU = bucket
		_, err := l.redis.ReserveCart(ctx, c, []redisstock.CartLine{line})
		var short *stock.ShortError
		switch {
		case errors.Is(err, redisstock.ErrInDoubt):
			doubt = err
		case !errors.As(err, &short):
			return bucket, unbucket(err)
		}
	}
	if doubt != nil {
		return sku, fmt.Errorf("%w: %w", redisstock.ErrInDoubt, &stock.ShortError{SKUs: []string{sku}})
	}
	return sku, &stock.ShortError{SKUs: []string{sku}}
}

// unbucket names, in a refusal of one line, its SKU rather than the
// bucket that refused it.
func unbucket(err error) error {
	var line *redisstock.LineError
	if errors.As(err, &line) {
		line.SKU, _ = redisstock.SplitBucket(line.SKU)
	}
	return err
}

// alsoShort names the lines that Redis has too little of for, with a
// plain read, so that a saga's refusal names every short SKU, not only the
// first; it reports doubt when sagas hold units that would fill one.
func (l *Lua) alsoShort(ctx context.Context, lines []redisstock.CartLine) (short []string, doubt bool) {
	for _, line := range lines {
		lacks := true
		for _, bucket := range l.bucketNames(line.SKU) {
			s, d, err := l.redis.Lacks(ctx, bucket, line.Quantity)
			lacks = lacks && err == nil && s
			doubt = doubt || d
		}
		if lacks {
			short = append(short, line.SKU)
		}
	}
	return short, doubt
}

// endCart ends the reservations of a saga's lines: done once the database
// has the cart, else given back. It runs even when the buyer's ctx has
// ended. Should Redis fail, they stay pending in their logs, and the
// reconciler gives them back once idle for the claim timeout.
func (l *Lua) endCart(saga string, held []string, persisted bool) {
	ctx, cancel := context.WithTimeout(context.Background(), order.RedisTimeout)
	defer cancel()
	for _, sku := range held {
		if persisted {
			l.dropped(ctx, "cart-done", l.redis.CartDone(ctx, sku, saga))
			continue
		}
		n, err := l.redis.GiveBack(ctx, sku, saga, l.rules.Limit > 0)
		countGiveBack(n, err)
	}
}

// settleCarts runs once a batch of carts has ended: each cart's
// reservations end, done once the database has the cart, else given
// back, all the batch's carts at once. A cart the database refused sold
// out was granted by a stale state in Redis, which is built again.
func (l *Lua) settleCarts(_ context.Context, batch []*groupcommit.Request[reservation], answers []order.Answer) {
	if l.hooks.cartPlaced != nil {
		l.hooks.cartPlaced()
	}
	var wg sync.WaitGroup
	for i, p := range batch {
		a := answers[i]
		wg.Go(func() { l.endCart(p.Meta.saga, p.Meta.held, a.Err == nil && !a.Replayed) })
		if errors.Is(a.Err, stock.ErrSoldOut) {
			for _, bucket := range p.Meta.held {
				sku, _ := redisstock.SplitBucket(bucket)
				l.fix(sku)
			}
		}
	}
	wg.Wait()
}

// countGiveBack counts a saga's compensation by its result.
func countGiveBack(n int, err error) {
	result := "returned"
	switch {
	case err != nil:
		result = "failed"
	case n == 0:
		result = "nothing-held"
	case n == -1:
		result = "duplicate"
	case n == -2:
		result = "persisted"
	}
	metrics.SagaCompensations.WithLabelValues(result).Inc()
}

// giveBackClaimed gives back the cart lines that a dead or stuck process
// left pending in sku's log.
func (l *Lua) giveBackClaimed(ctx context.Context, sku string, claimed []redisstock.Reservation) {
	for _, r := range claimed {
		n, err := l.redis.GiveBack(ctx, sku, r.Saga, l.rules.Limit > 0)
		countGiveBack(n, err)
	}
}
