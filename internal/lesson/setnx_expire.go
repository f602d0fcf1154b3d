package lesson

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// SetNXThenExpire takes the lock with SETNX and then gives it a TTL with
// EXPIRE, as seed 002's wrongGetLock does:
//
//	if jedis.setnx(lockKey, requestId) == 1 {
//	    // if the program crashes here, the expiry is never set: deadlock
//	    jedis.expire(lockKey, expireTime)
//	}
//
// A holder that dies between the two commands leaves a key that never
// expires: nobody takes the lock again. The fix is one atomic command,
// SET key value NX PX ttl, as lock.Redis sends.
type SetNXThenExpire struct {
	owned
	// Crash, if set, runs between the two commands. An error from it ends
	// TryLock there, as the death of the process would.
	Crash func() error
}

var _ Lock = (*SetNXThenExpire)(nil)

// NewSetNXThenExpire returns the mistake on key.
func NewSetNXThenExpire(client *redis.Client, key string, ttl time.Duration) *SetNXThenExpire {
	return &SetNXThenExpire{owned: newOwned(client, key, ttl)}
}

// TryLock implements Lock.
func (l *SetNXThenExpire) TryLock(ctx context.Context) (bool, error) {
	ok, err := l.client.SetNX(ctx, l.key, l.value, 0).Result()
	if err != nil || !ok {
		return false, err
	}
	if l.Crash != nil {
		if err := l.Crash(); err != nil {
			return false, err
		}
	}
	return true, l.client.Expire(ctx, l.key, l.ttl).Err()
}

// Unlock implements Lock.
func (l *SetNXThenExpire) Unlock(ctx context.Context) error {
	return l.client.Del(ctx, l.key).Err()
}
