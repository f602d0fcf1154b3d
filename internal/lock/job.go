package lock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/stockguard/shop/internal/metrics"
)

// Job is work that must run on one node at a time: a periodic job of a
// fleet, such as a reconciliation. Each run holds the lock named after the
// job, as ShedLock does, and gets the lease's fencing token, to make its
// writes conditional on, and a ctx that ends once the lease is known lost.
// A node that dies mid-run leaves the lock to expire within its TTL; the
// next turn of another node then runs the job. See
// docs/strategies.md#reconciliation.
type Job func(ctx context.Context, token int64) error

// jobLock is the lock name of the job name.
func jobLock(name string) string { return "job:" + name }

// releaseTimeout bounds a run's release, made even when its ctx has ended.
const releaseTimeout = 5 * time.Second

// Once runs the job name once under its lock. With wait, it waits for the
// lock until ctx ends; without, it fails with ErrLocked while another node
// runs the job.
func (j Job) Once(ctx context.Context, l Locker, name string, wait bool) (err error) {
	acquire := l.TryAcquire
	if wait {
		acquire = l.Acquire
	}
	lease, err := acquire(ctx, jobLock(name))
	if err != nil {
		return err
	}
	running := metrics.JobRunning.WithLabelValues(name)
	running.Set(1)
	defer func() {
		running.Set(0)
		lost := lease.Err() // nil while held
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		// A lost lease expires on its own. A release that finds the lock
		// gone, or another's, says the lease ran out before the run ended,
		// though no renewal had told it yet: a process paused past the TTL
		// may resume and finish its run before its renewal runs.
		if rerr := lease.Release(rctx); lost == nil && errors.Is(rerr, ErrNotHeld) {
			lost = rerr
		}
		result := "ok"
		switch {
		case lost != nil:
			err, result = errors.Join(err, lost), "lost"
		case err != nil:
			result = "failed"
		}
		metrics.JobRuns.WithLabelValues(name, result).Inc()
	}()
	held, cancel := WithLease(ctx, lease)
	defer cancel()
	return j(held, lease.Token())
}

// Every runs the job name about once per interval, on whichever node takes
// its lock first, until ctx ends. A turn that finds the lock held by
// another node is skipped. onErr, if not nil, hears of each failed run.
func (j Job) Every(ctx context.Context, l Locker, name string, interval time.Duration, onErr func(error)) {
	for _, result := range []string{"ok", "failed", "lost"} {
		metrics.JobRuns.WithLabelValues(name, result)
	}
	metrics.JobRunning.WithLabelValues(name)
	for {
		// Jitter, so that the nodes' turns do not fall in step.
		wait := interval/2 + rand.N(interval)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		err := j.Once(ctx, l, name, false)
		if err != nil && !errors.Is(err, ErrLocked) && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
	}
}
