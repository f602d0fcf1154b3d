package lesson

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClockLock is seed 000's RedisLock: the key holds the time at which the
// lock expires, by the clock of the client that took it.
//
//	lock:   SETNX key expiry; if that fails and the stored expiry is in the
//	        past by this client's clock, GETSET key expiry, and win if the
//	        old value is the one just read.
//	unlock: DEL key.
//
// A client whose clock runs ahead by more than the TTL sees a live lock as
// expired and takes it over, and a holder that overran its expiry deletes
// the lock of whoever took it over. lock.Redis fixes both: Redis expires
// the key by its own clock, and the release compares the owner's random
// value before it deletes.
type ClockLock struct {
	client *redis.Client
	key    string
	ttl    time.Duration
	// Now is this client's clock; nil means time.Now. A test sets it to
	// show clocks that disagree.
	Now    func() time.Time
	locked bool
}

var _ Lock = (*ClockLock)(nil)

// NewClockLock returns the mistake on key.
func NewClockLock(client *redis.Client, key string, ttl time.Duration) *ClockLock {
	return &ClockLock{client: client, key: key, ttl: ttl}
}

func (l *ClockLock) now() int64 {
	if l.Now != nil {
		return l.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// TryLock implements Lock.
func (l *ClockLock) TryLock(ctx context.Context) (bool, error) {
	expires := strconv.FormatInt(l.now()+l.ttl.Milliseconds()+1, 10)
	ok, err := l.client.SetNX(ctx, l.key, expires, 0).Result()
	if err != nil || ok {
		l.locked = ok
		return ok, err
	}
	current, err := l.client.Get(ctx, l.key).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil // released meanwhile; the seed retries later
	}
	if err != nil {
		return false, err
	}
	if ms, err := strconv.ParseInt(current, 10, 64); err != nil || ms >= l.now() {
		return false, err // not expired, by this client's clock
	}
	old, err := l.client.GetSet(ctx, l.key, expires).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	l.locked = old == current
	return l.locked, nil
}

// Unlock implements Lock: DEL if this client believes it holds the lock.
func (l *ClockLock) Unlock(ctx context.Context) error {
	if !l.locked {
		return nil
	}
	l.locked = false
	return l.client.Del(ctx, l.key).Err()
}
