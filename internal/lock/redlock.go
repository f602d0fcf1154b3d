package lock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed confirm.lua
	confirmLua string
	//go:embed extend.lua
	extendLua string
	//go:embed release.lua
	releaseLua string

	confirmScript = redis.NewScript(confirmLua)
	extendScript  = redis.NewScript(extendLua)
)

// CompareAndDelete deletes KEYS[1] only if it holds ARGV[1], the owner's
// token, in one step, and returns 1, or 0 if another holder has the key or
// it expired: the release of a Redis lock that never frees another's.
var CompareAndDelete = redis.NewScript(releaseLua)

// Redlock locks on a quorum of N ≥ 3 independent Redis masters, the
// algorithm of https://redis.io/docs/latest/develop/use/patterns/distributed-locks/:
// the lock is held when a majority (N/2+1) granted it with time left,
// valid for TTL − elapsed − clock drift; otherwise it is released on every
// master and tried again. The watchdog and the release act on every master,
// and count only with a majority.
//
// Its fencing token is the largest count of the majority's masters, which
// confirm.lua raises on every master of that majority before the lease is
// handed out. A master that restarts empty forgets lock and counter, and
// the lock can then be granted twice. See docs/locks.md#redlock.
type Redlock struct {
	locker
	nodes       []RedisClient
	quorum      int
	ttl         time.Duration
	nodeTimeout time.Duration
	prefix      string
}

var _ Locker = (*Redlock)(nil)

// NewRedlock returns a Locker on independent masters: separate servers, not
// replicas of each other. An odd number tolerates the most failures for its
// size.
func NewRedlock(nodes []RedisClient, opts *RedisOptions) (*Redlock, error) {
	if len(nodes) < 3 {
		return nil, fmt.Errorf("lock: redlock needs at least 3 independent masters, got %d", len(nodes))
	}
	r := &Redlock{
		nodes:       nodes,
		quorum:      len(nodes)/2 + 1,
		ttl:         opts.ttl(),
		nodeTimeout: opts.nodeTimeout(),
		prefix:      opts.prefix(),
	}
	r.locker = remote("redlock", r)
	return r, nil
}

func (r *Redlock) grant(ctx context.Context, name string, wait bool) (grant, error) {
	keys := redisKeys(r.prefix, name)
	return poll(ctx, wait, redisPoll, func(ctx context.Context) (grant, error) {
		return r.try(ctx, keys)
	})
}

// try makes one round of the algorithm.
func (r *Redlock) try(ctx context.Context, keys []string) (grant, error) {
	owner := rand.Text()
	start := time.Now()
	ttl := r.ttl.Milliseconds()
	counts := r.call(ctx, r.nodeTimeout, func(ctx context.Context, c RedisClient) (int64, error) {
		return acquireScript.Run(ctx, c, keys, owner, ttl).Int64()
	})
	var token int64
	held := 0
	for _, c := range counts {
		if c.err == nil {
			held++
			token = max(token, c.n)
		}
	}
	if held >= r.quorum {
		confirmed := r.confirm(ctx, keys, owner, token)
		if count(confirmed, 1) >= r.quorum && time.Since(start) < r.ttl-drift(r.ttl) {
			return grant{
				token:   token,
				release: func(ctx context.Context) error { return r.release(ctx, keys[:1], owner) },
				renew: renewal(r.ttl, start, func(ctx context.Context) error {
					return r.extend(ctx, keys[:1], owner)
				}),
				raise: func(ctx context.Context, token int64) error {
					return r.majority(r.confirm(ctx, keys, owner, token), "raised")
				},
			}, nil
		}
	}
	// Release wherever the key may be this owner's: where it was set, and
	// where the answer did not come, since the command may have run all the
	// same. A master that answered "held" has nothing of this owner's.
	if slices.ContainsFunc(counts, func(c result) bool { return !errors.Is(c.err, redis.Nil) }) {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.nodeTimeout)
		defer cancel()
		r.release(cleanup, keys[:1], owner)
	}
	if err := ctx.Err(); err != nil {
		return grant{}, context.Cause(ctx)
	}
	return grant{}, ErrLocked
}

// confirm raises the fence counter of every master where the owner holds
// the lock to token, and returns the masters' answers (1 where it did).
func (r *Redlock) confirm(ctx context.Context, keys []string, owner string, token int64) []result {
	return r.call(ctx, r.nodeTimeout, func(ctx context.Context, c RedisClient) (int64, error) {
		return confirmScript.Run(ctx, c, keys, owner, token).Int64()
	})
}

// extend renews the lock on every master; it holds if a majority did.
func (r *Redlock) extend(ctx context.Context, keys []string, owner string) error {
	ttl := r.ttl.Milliseconds()
	res := r.call(ctx, r.nodeTimeout, func(ctx context.Context, c RedisClient) (int64, error) {
		return extendScript.Run(ctx, c, keys, owner, ttl).Int64()
	})
	return r.majority(res, "renewed")
}

// release deletes the lock on every master where the owner still holds it.
// It reports ErrNotHeld unless a majority held it: the lock, as Redlock
// defines it, was then no longer the owner's. Unlike the calls that race
// the lease, it waits for the masters as long as ctx allows.
func (r *Redlock) release(ctx context.Context, keys []string, owner string) error {
	res := r.call(ctx, 0, func(ctx context.Context, c RedisClient) (int64, error) {
		return CompareAndDelete.Run(ctx, c, keys, owner).Int64()
	})
	return r.majority(res, "released")
}

// majority reports whether a majority of masters answered 1. If so many
// answered 0 that no majority is possible, the owner no longer holds the
// lock: ErrNotHeld.
func (r *Redlock) majority(res []result, what string) error {
	ok, not := count(res, 1), count(res, 0)
	switch {
	case ok >= r.quorum:
		return nil
	case not > len(r.nodes)-r.quorum:
		return fmt.Errorf("%w: %s on %d of %d masters", ErrNotHeld, what, ok, len(r.nodes))
	}
	var errs []error
	for _, x := range res {
		errs = append(errs, x.err)
	}
	return fmt.Errorf("lock: redlock %s on %d of %d masters: %w", what, ok, len(r.nodes), errors.Join(errs...))
}

// result is one master's answer.
type result struct {
	n   int64
	err error
}

// count counts the answers n.
func count(res []result, n int64) int {
	c := 0
	for _, x := range res {
		if x.err == nil && x.n == n {
			c++
		}
	}
	return c
}

// errNoAnswer is the result of a master that did not answer in time.
var errNoAnswer = errors.New("lock: redlock master did not answer in time")

// call runs fn on every master at once and returns their answers in order.
// A master that has not answered when ctx ends, or within timeout if it is
// not 0, counts as failed, even if its client ignores the ctx deadline.
func (r *Redlock) call(ctx context.Context, timeout time.Duration, fn func(context.Context, RedisClient) (int64, error)) []result {
	cancel := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	type answer struct {
		i int
		result
	}
	answers := make(chan answer, len(r.nodes))
	for i, c := range r.nodes {
		go func() {
			n, err := fn(ctx, c)
			answers <- answer{i, result{n, err}}
		}()
	}
	res := make([]result, len(r.nodes))
	for i := range res {
		res[i].err = errNoAnswer
	}
	for range r.nodes {
		select {
		case a := <-answers:
			res[a.i] = a.result
		case <-ctx.Done():
			return res
		}
	}
	return res
}
