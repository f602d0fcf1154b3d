package lock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

//go:embed acquire.lua
var acquireLua string

var acquireScript = redis.NewScript(acquireLua)

// RedisClient is what the Redis locks need of a go-redis client, such as
// *redis.Client.
type RedisClient interface {
	redis.Scripter
}

// RedisOptions configures Redis and Redlock. A nil *RedisOptions is valid.
type RedisOptions struct {
	// TTL is the lease: how long a lock outlives a holder that stops
	// renewing it. Default 10s.
	TTL time.Duration
	// Prefix starts every key. Default "stockguard:lock:".
	Prefix string
	// NodeTimeout bounds each call to one master of a Redlock. Default
	// TTL/20, at most 250ms: small against the TTL, as the Redlock
	// description asks, so that a dead master costs little of the lease.
	NodeTimeout time.Duration
}

func (o *RedisOptions) ttl() time.Duration {
	if o == nil || o.TTL <= 0 {
		return 10 * time.Second
	}
	return o.TTL
}

func (o *RedisOptions) prefix() string {
	if o == nil || o.Prefix == "" {
		return "stockguard:lock:"
	}
	return o.Prefix
}

func (o *RedisOptions) nodeTimeout() time.Duration {
	if o == nil || o.NodeTimeout <= 0 {
		return min(o.ttl()/20, 250*time.Millisecond)
	}
	return o.NodeTimeout
}

// redisKeys returns the keys of the lock name: the lock and its fence
// counter. The braces put both in one Redis Cluster slot, as a script
// touching both requires. The counter never expires: it carries the tokens
// from one acquisition to the next.
func redisKeys(prefix, name string) []string {
	lock := prefix + "{" + name + "}"
	return []string{lock, lock + ":fence"}
}

// Redis locks on one Redis master: SET NX PX with a random owner token, and
// a fencing token counted in the same Lua script (acquire.lua). It then
// hands the key to bsm/redislock, which renews it (the watchdog) and
// releases it with a compare-and-delete. A restart without persistence
// counts tokens from 1 again, below the fence; the holder then raises the
// counter past it (Lease.Raise). See docs/locks.md#redis.
type Redis struct {
	locker
	client RedisClient
	locks  *redislock.Client
	ttl    time.Duration
	prefix string
}

var _ Locker = (*Redis)(nil)

// NewRedis returns a Locker on one Redis master.
func NewRedis(client RedisClient, opts *RedisOptions) *Redis {
	r := &Redis{client: client, locks: redislock.New(client), ttl: opts.ttl(), prefix: opts.prefix()}
	r.locker = remote("redis", r)
	return r
}

func (r *Redis) grant(ctx context.Context, name string, wait bool) (grant, error) {
	keys := redisKeys(r.prefix, name)
	return poll(ctx, wait, redisPoll, func(ctx context.Context) (grant, error) {
		owner := rand.Text()
		start := time.Now()
		token, err := acquireScript.Run(ctx, r.client, keys, owner, r.ttl.Milliseconds()).Int64()
		if errors.Is(err, redis.Nil) {
			return grant{}, ErrLocked
		}
		if err != nil {
			return grant{}, err
		}
		// redislock re-obtains a key whose token it is given. Should the key
		// have expired in between (a pause longer than the TTL), this takes
		// it afresh with an old token: safe, since fencing refuses that token
		// wherever a newer holder has written. redislock bounds a call whose
		// ctx has no deadline by the TTL, which a loaded machine can outlast
		// with a short TTL; Acquire promises to wait as long as ctx does, so
		// such a call gets a deadline of its own, far off.
		octx, cancel := ctx, context.CancelFunc(func() {})
		if _, ok := ctx.Deadline(); !ok {
			octx, cancel = context.WithTimeout(ctx, time.Minute)
		}
		held, err := r.locks.Obtain(octx, keys[0], r.ttl, &redislock.Options{Token: owner})
		cancel()
		if errors.Is(err, redislock.ErrNotObtained) {
			return grant{}, ErrLocked
		}
		if err != nil {
			return grant{}, err
		}
		return grant{
			token:   token,
			release: func(ctx context.Context) error { return notHeld(held.Release(ctx)) },
			renew: renewal(r.ttl, start, func(ctx context.Context) error {
				return notHeld(held.Refresh(ctx, r.ttl, nil))
			}),
			raise: func(ctx context.Context, token int64) error {
				n, err := confirmScript.Run(ctx, r.client, keys, owner, token).Int64()
				if err == nil && n == 0 {
					err = ErrNotHeld
				}
				return err
			},
		}, nil
	})
}

// notHeld translates redislock's "the key is not ours" errors.
func notHeld(err error) error {
	if errors.Is(err, redislock.ErrLockNotHeld) || errors.Is(err, redislock.ErrNotObtained) {
		return ErrNotHeld
	}
	return err
}
