package backend

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// failoverWait makes a Redis call that meets a failover wait and try
// again, within its context's deadline, rather than fail at once: while
// a master is down and until its replica is promoted, calls find the
// old master refusing connections, or a replica that answers READONLY,
// LOADING or MASTERDOWN. go-redis's own few retries span about a tenth
// of a second; an election takes seconds.
//
// A call is tried again only when that is safe: when its error says the
// call did not run (notRun), or when it only reads. A write whose
// connection died after it was sent may have run, and is not repeated
// here. A call whose context has no deadline fails at once, as before:
// its caller, a background job, tries again on its own schedule.
type failoverWait struct{}

// The pauses between tries: doubling from the first to the last, each
// jittered, so that the waiting buyers do not ask in step.
const (
	firstFailoverPause = 50 * time.Millisecond
	lastFailoverPause  = 400 * time.Millisecond
)

func (failoverWait) DialHook(next redis.DialHook) redis.DialHook { return next }

func (failoverWait) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		for pause := firstFailoverPause; ; pause = min(2*pause, lastFailoverPause) {
			err := next(ctx, cmd)
			if !notRun(err) && !(reads(cmd) && Unavailable(err)) || !waitFailover(ctx, pause) {
				return err
			}
		}
	}
}

func (failoverWait) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for pause := firstFailoverPause; ; pause = min(2*pause, lastFailoverPause) {
			err := next(ctx, cmds)
			if !pipelineNotRun(cmds, err) || !waitFailover(ctx, pause) {
				return err
			}
		}
	}
}

// pipelineNotRun reports whether a command of a pipeline failed, and
// every command of it that failed, failed without running (or only
// reads). A nil reply (redis.Nil) is an answer, not a failure.
func pipelineNotRun(cmds []redis.Cmder, err error) bool {
	failed := false
	for _, cmd := range cmds {
		e := cmd.Err()
		if e == nil || errors.Is(e, redis.Nil) {
			continue
		}
		if !notRun(e) && !(reads(cmd) && Unavailable(e)) {
			return false
		}
		failed = true
	}
	return failed || notRun(err)
}

// notRun reports whether err says that Redis did not run the call: no
// connection could be made, or the server refused it as a replica, while
// loading its data, without a master, or with the cluster down. A write
// refused by a replica, or by a demoted master, ran nowhere: what a
// demoted master took before is dropped when it syncs with the new one.
func notRun(err error) bool {
	var op *net.OpError
	return err != nil && (errors.As(err, &op) && op.Op == "dial" ||
		redis.IsReadOnlyError(err) || redis.IsLoadingError(err) || redis.IsMasterDownError(err) ||
		redis.IsClusterDownError(err) || redis.IsTryAgainError(err))
}

// readCommands are the commands the shop sends that only read.
var readCommands = map[string]bool{
	"ping": true, "get": true, "mget": true, "exists": true, "ttl": true, "pttl": true, "type": true,
	"hget": true, "hmget": true, "hgetall": true, "hlen": true, "xrange": true, "xrevrange": true, "xlen": true,
	"xinfo": true, "scan": true, "info": true, "evalsha_ro": true, "eval_ro": true,
}

// reads reports whether cmd only reads.
func reads(cmd redis.Cmder) bool { return readCommands[strings.ToLower(cmd.Name())] }

// noWait marks the context of a call that must not wait out a failover:
// a readiness check, which reports the failover instead.
type noWait struct{}

// waitFailover sleeps about pause and reports true, or reports false at
// once if ctx has no deadline, would end first, or is marked noWait.
func waitFailover(ctx context.Context, pause time.Duration) bool {
	deadline, ok := ctx.Deadline()
	pause = pause/2 + rand.N(pause/2)
	if !ok || time.Until(deadline) <= pause || ctx.Value(noWait{}) != nil {
		return false
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
