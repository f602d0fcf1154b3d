package order

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/redispipe"
	"github.com/stockguard/shop/internal/stock"
)

// How batched keeps its buyers' Idempotency-Keys (keyKeeper): what its
// batches already know, they answer. An order is its key's answer: the
// first read, or the unique (user_id, idempotency_key) index, finds it. A
// request whose key's first is still being decided in this instance is
// told so (claims); in another instance, the index lets one order through,
// and the other request replays it. Refusals, which leave no row, are kept
// in Redis (keptAnswers), read and written in pipelines that concurrent
// requests share.

// claims are the keys of the requests this instance is deciding.
type claims struct {
	mu   sync.Mutex
	held map[userKey]bool
}

// claim holds r's key, or returns false if a request holds it already.
func (c *claims) claim(r PlaceRequest) (release func(), ok bool) {
	k := userKey{r.UserID, r.IdempotencyKey}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[k] {
		return nil, false
	}
	if c.held == nil {
		c.held = make(map[userKey]bool)
	}
	c.held[k] = true
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.held, k)
	}, true
}

// keptAnswers keeps final refusals in Redis, each under its user's key,
// with the request's SKU and quantity, for ttl.
type keptAnswers struct {
	pipe   *redispipe.Pipe
	prefix string
	ttl    time.Duration
}

func newKeptAnswers(rdb redis.UniversalClient, prefix string, ttl time.Duration) *keptAnswers {
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	return &keptAnswers{pipe: redispipe.New(rdb), prefix: prefix, ttl: ttl}
}

// key is where r's answer is kept. Neither a user nor a key holds a
// newline.
func (k *keptAnswers) key(r PlaceRequest) string {
	return k.prefix + "answer:" + r.UserID + "\n" + r.IdempotencyKey
}

// find returns the answer kept under r's key, replayed; found is false when
// there is none, or Redis cannot say: the database's unique index still
// keeps the key from a second order.
func (k *keptAnswers) find(ctx context.Context, r PlaceRequest) (a placed, found bool) {
	v, err := k.pipe.Do(ctx, "GET", k.key(r)).Text()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			metrics.Idempotency.WithLabelValues("store-unavailable").Inc()
		}
		return placed{}, false
	}
	sku, rest, _ := strings.Cut(v, "|")
	quantity, answer, _ := strings.Cut(rest, "|")
	if sku != r.SKU || quantity != strconv.Itoa(r.Quantity) {
		return placed{err: fmt.Errorf("order: place: %w: its first request was for %s of %s", ErrKeyReused, quantity, sku)}, true
	}
	return replayKept(answer, r), true
}

// keep keeps err as r's answer if it is a final refusal. Should Redis fail,
// a retry asks again.
func (k *keptAnswers) keep(ctx context.Context, r PlaceRequest, err error) {
	if err == nil {
		return
	}
	if answer, ok := kept(placed{err: err}); ok {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
		defer cancel()
		v := r.SKU + "|" + strconv.Itoa(r.Quantity) + "|" + answer
		_ = k.pipe.Do(ctx, "SET", k.key(r), v, "PX", k.ttl.Milliseconds()).Err()
	}
}

// keepingKeys places r as place does, keeping its key: a request whose
// key is held in this instance is told so; one whose key has a kept
// answer gets it; and a refusal is kept.
func keepingKeys(ctx context.Context, c *claims, k *keptAnswers, r PlaceRequest, place func() (Order, bool, error)) (Order, bool, error) {
	release, ok := c.claim(r)
	if !ok {
		return Order{}, false, fmt.Errorf("order: place: %w: the first request with %s's key %q is being decided", stock.ErrInProgress, r.UserID, r.IdempotencyKey)
	}
	defer release()
	if a, found := k.find(ctx, r); found {
		return a.o, a.replayed, a.err
	}
	o, replayed, err := place()
	k.keep(ctx, r, err)
	return o, replayed, err
}
