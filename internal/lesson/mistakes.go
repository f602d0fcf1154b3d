// Package lesson reproduces the failures the seed articles describe, each
// beside its fix, for `shop lesson`. A Lesson runs the same scenario twice,
// with the mistake and with the fix, and reports numbers read back from
// Redis and the database, never what its code meant to do.
//
// The mistakes themselves live here too; nothing here is safe, and no
// strategy can select it: the shop's order path never imports it.
//
//	SetNXThenExpire   SETNX, then EXPIRE: a crash between them locks forever (seed 002)
//	UncheckedDelete   DEL without an owner check frees another holder's lock (seeds 002, 004)
//	ClockLock         SETNX and GETSET on expiry timestamps: trusts every client's clock,
//	                  and its release deletes whoever holds the lock (seed 000)
//	BareLease         a lease with no watchdog, and writes with no fencing token: a holder
//	                  paused past its TTL writes over its successor (seeds 002, 004)
//
// Each lesson has a test on real servers that checks the stores itself.
// See docs/lessons.md.
package lesson

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/lock"
)

// Lock is what every mistake offers: the shape of the seeds' Java locks.
type Lock interface {
	// TryLock makes one attempt and reports whether it took the lock.
	TryLock(ctx context.Context) (bool, error)
	// Unlock gives the lock up.
	Unlock(ctx context.Context) error
}

// owned is a lock key and a holder's random value in it.
type owned struct {
	client *redis.Client
	key    string
	ttl    time.Duration
	value  string
}

func newOwned(client *redis.Client, key string, ttl time.Duration) owned {
	return owned{client: client, key: key, ttl: ttl, value: rand.Text()}
}

// compareAndDelete releases o only while it still holds the key: the
// owner check that a plain DEL lacks.
func compareAndDelete(ctx context.Context, o owned) error {
	return lock.CompareAndDelete.Run(ctx, o.client, []string{o.key}, o.value).Err()
}

// TryLock takes the key with SET NX PX: the one right way to take a Redis
// lock, where the mistakes after it go wrong.
func (o owned) TryLock(ctx context.Context) (bool, error) {
	return o.client.SetNX(ctx, o.key, o.value, o.ttl).Result()
}
