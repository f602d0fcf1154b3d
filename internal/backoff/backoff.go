// Package backoff paces retries: a full-jitter exponential wait that ends
// early when the ctx does, shared by the stock strategies and the locks.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Bounds of the wait: it starts under base and doubles up to Limit. A lock
// handed over or a row lock released is usually free again within
// milliseconds, and a limit near the length of one transaction keeps a
// waiter from sleeping through many hand-overs.
const (
	base  = time.Millisecond
	Limit = 64 * time.Millisecond
)

// Wait sleeps a random duration below min(base·2^attempt, Limit) (full
// jitter, so that waiters released together do not retry in step), or
// returns context.Cause(ctx) as soon as ctx ends.
func Wait(ctx context.Context, attempt int) error { return WaitUpTo(ctx, attempt, Limit) }

// WaitUpTo is Wait with a limit of its own, for a retry cheaper or dearer
// than a transaction.
func WaitUpTo(ctx context.Context, attempt int, limit time.Duration) error {
	t := time.NewTimer(rand.N(min(base<<min(attempt, 16), limit)) + time.Microsecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
