package lock

import (
	"context"
	"time"

	"github.com/stockguard/shop/internal/backoff"
)

// electionPoll bounds the backoff between two attempts that met an
// election. An ensemble elects a new leader in about a second, and a
// client finds a member that serves within a few polls of it.
const electionPoll = 100 * time.Millisecond

// throughElection runs op until it succeeds, fails for a reason that
// transient does not accept, or ctx ends, and returns op's last error. A
// lock server's ensemble that lost its leader, or a client that lost its
// member, serves again within about a second, and a buyer waits for that
// within its own deadline rather than being refused at once. op must be
// safe to repeat: holding a lock stays the store's decision, which the
// fencing token records.
func throughElection(ctx context.Context, transient func(error) bool, op func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := op(ctx)
		if err == nil || ctx.Err() != nil || !transient(err) {
			return err
		}
		if backoff.WaitUpTo(ctx, attempt, electionPoll) != nil {
			return err
		}
	}
}
