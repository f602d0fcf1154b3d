package order

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/redispipe"
)

// How the service keeps its buyers' Idempotency-Keys for orders
// (StoresKeys), unless its placement keeps them itself
// (Placement.StoresKeys): what the database already knows, it answers. An order is its key's
// answer: the first read, or the unique (user_id, idempotency_key) index,
// finds it, so an order costs no Redis write. A request whose key's first
// is still being decided in this instance is told so (claims); in another
// instance, the index lets one order through, and the other request
// replays it. Refusals, which leave no row, are kept in Redis, read and
// written in pipelines that concurrent requests share (redispipe).

// RedisTimeout bounds the Redis calls that run even when the buyer's ctx
// has ended, such as keeping an answer once its order has committed.
const RedisTimeout = 5 * time.Second

// KeyOptions say where the service keeps its buyers' refusals.
type KeyOptions struct {
	Redis  redis.UniversalClient
	Prefix string        // of every key
	TTL    time.Duration // how long a refusal is kept; default 24h
}

// keys keeps a service's keys.
type keys struct {
	pipe   *redispipe.Pipe
	prefix string
	ttl    time.Duration

	mu   sync.Mutex
	held map[UserKey]bool // the keys of the requests this instance decides
}

func newKeys(o *KeyOptions) *keys {
	return &keys{pipe: redispipe.New(o.Redis), prefix: o.Prefix, ttl: idempotency.TTL(o.TTL), held: make(map[UserKey]bool)}
}

// around is place, keeping its requests' keys: a request whose key is
// held in this instance is told so; one whose key has a kept answer gets
// it; and a refusal is kept.
func (k *keys) around(place placeFunc) placeFunc {
	return func(ctx context.Context, r PlaceRequest) (Order, bool, error) {
		release, ok := k.claim(r)
		if !ok {
			return Order{}, false, fmt.Errorf("order: place: %w: the first request with %s's key %q is being decided", idempotency.ErrInProgress, r.UserID, r.IdempotencyKey)
		}
		defer release()
		if a, found := k.find(ctx, r); found {
			return a.Order, a.Replayed, a.Err
		}
		o, replayed, err := place(ctx, r)
		k.store(ctx, r, err)
		return o, replayed, err
	}
}

// counted is place, counting what it answered other than a new request
// (metrics.Idempotency), where the service keeps its keys, as the HTTP
// layer's key store does.
func counted(place placeFunc) placeFunc {
	return func(ctx context.Context, r PlaceRequest) (Order, bool, error) {
		o, replayed, err := place(ctx, r)
		switch {
		case replayed:
			metrics.Idempotency.WithLabelValues("replayed").Inc()
		case errors.Is(err, idempotency.ErrInProgress):
			metrics.Idempotency.WithLabelValues("in-progress").Inc()
		case errors.Is(err, idempotency.ErrKeyReused):
			metrics.Idempotency.WithLabelValues("key-reused").Inc()
		}
		return o, replayed, err
	}
}

// claim holds r's key, or returns false if a request holds it already.
func (k *keys) claim(r PlaceRequest) (release func(), ok bool) {
	uk := UserKey{r.UserID, r.IdempotencyKey}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[uk] {
		return nil, false
	}
	k.held[uk] = true
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		delete(k.held, uk)
	}, true
}

// key is where r's refusal is kept.
func (k *keys) key(r PlaceRequest) string {
	return idempotency.Key(k.prefix, "order", r.UserID, r.IdempotencyKey)
}

// fingerprint is r's, as its key's record keeps it (idempotency.Record):
// its SKUs and their quantities, escaped, so that it holds no "|", and
// readable, so that the refusal of another request names them.
func fingerprint(r PlaceRequest) string {
	skus, quantities := r.what()
	return url.PathEscape(skus) + "/" + url.PathEscape(quantities)
}

// asked reads a fingerprint back: the SKUs and quantities it names.
func asked(fp string) (skus, quantities string) {
	s, q, _ := strings.Cut(fp, "/")
	skus, _ = url.PathUnescape(s)
	quantities, _ = url.PathUnescape(q)
	return skus, quantities
}

// find returns the refusal kept under r's key, replayed; found is false
// when there is none, or Redis cannot say: the database's unique index
// still keeps the key from a second order.
func (k *keys) find(ctx context.Context, r PlaceRequest) (a Answer, found bool) {
	v, err := k.pipe.Do(ctx, "GET", k.key(r)).Text()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			metrics.Idempotency.WithLabelValues("store-unavailable").Inc()
		}
		return Answer{}, false
	}
	return replayRecord(v, r), true
}

// keepFirst implements KeepFirst: one SET NX GET.
func (k *keys) keepFirst(ctx context.Context, r PlaceRequest, answer string) (Answer, bool) {
	v, err := k.pipe.Do(ctx, "SET", k.key(r), idempotency.Record(fingerprint(r), answer), "NX", "GET", "PX", k.ttl.Milliseconds()).Text()
	if err != nil { // redis.Nil: kept now
		return Answer{}, false
	}
	return replayRecord(v, r), true
}

// replayRecord is the record v, kept under r's key, replayed to r; a
// record of another request refuses r as a reused key.
func replayRecord(v string, r PlaceRequest) Answer {
	first, answer, ok := idempotency.Decode(v)
	if ok && first != fingerprint(r) {
		sku, quantity := asked(first)
		return Answer{Err: fmt.Errorf("order: place: %w: its first request was for %s of %s", idempotency.ErrKeyReused, quantity, sku)}
	}
	return ReplayStored(answer, r)
}

// store keeps err as r's answer if it is a final refusal. Should Redis fail,
// a retry asks again.
func (k *keys) store(ctx context.Context, r PlaceRequest, err error) {
	_ = KeepRefusal(ctx, err, func(ctx context.Context, answer string) error {
		return k.pipe.Do(ctx, "SET", k.key(r), idempotency.Record(fingerprint(r), answer), "PX", k.ttl.Milliseconds()).Err()
	})
}
