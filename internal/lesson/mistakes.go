// Package lesson keeps the classic mistakes with distributed locks, from
// the seed articles, each reproduced beside its fix. Nothing here is safe,
// and no strategy can select it: the shop's order path never imports it.
// The mistakes use the stock, so they live above it, not under
// internal/lock.
//
// Each mistake has a test that injects the exact fault that breaks it (a
// crash between two commands, a pause past the TTL, a clock that runs
// ahead) and watches it fail, then runs the same scenario against the
// corresponding lock of internal/lock, which holds:
//
//	SetNXThenExpire   SETNX, then EXPIRE: a crash between them locks forever (seed 002)
//	UncheckedDelete   DEL without an owner check frees another holder's lock (seeds 002, 004)
//	ClockLock         SETNX and GETSET on expiry timestamps: trusts every client's clock,
//	                  and its release deletes whoever holds the lock (seed 000)
//	BareLease         a lease with no watchdog, and writes with no fencing token: a holder
//	                  paused past its TTL writes over its successor (seeds 002, 004)
//
// Run them with: go test -v ./internal/lesson
package lesson

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/redis/go-redis/v9"
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

// TryLock takes the key with SET NX PX: the one right way to take a Redis
// lock, where the mistakes after it go wrong.
func (o owned) TryLock(ctx context.Context) (bool, error) {
	return o.client.SetNX(ctx, o.key, o.value, o.ttl).Result()
}
