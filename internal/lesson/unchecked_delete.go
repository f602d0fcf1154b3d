package lesson

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// UncheckedDelete takes the lock correctly, with SET NX PX, and releases it
// with a plain DEL (seeds 002 and 004):
//
//  1. A's lease expires while A is slow (a GC pause, a slow query);
//  2. B takes the lock;
//  3. A finishes and deletes the key: B's lock;
//  4. C takes the lock while B still works.
//
// The fix compares the owner and deletes in one Lua script, as
// lock.Redis's release (bsm/redislock) does.
type UncheckedDelete struct{ owned }

var _ Lock = (*UncheckedDelete)(nil)

// NewUncheckedDelete returns the mistake on key.
func NewUncheckedDelete(client *redis.Client, key string, ttl time.Duration) *UncheckedDelete {
	return &UncheckedDelete{newOwned(client, key, ttl)}
}

// Unlock implements Lock: DEL, whoever holds the key now.
func (l *UncheckedDelete) Unlock(ctx context.Context) error {
	return l.client.Del(ctx, l.key).Err()
}
