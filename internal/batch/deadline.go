package batch

import (
	"context"
	"time"
)

// Waiting returns a ctx for work done on behalf of buyers who wait
// together, such as a batch or a shared read: it lasts until the latest
// deadline of those whose ctx has not ended, a minute for one with no
// deadline, and is done at once when none waits any more.
func Waiting(ctxs []context.Context) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, ctx := range ctxs {
		if ctx.Err() != nil {
			continue
		}
		d, ok := ctx.Deadline()
		if !ok {
			d = time.Now().Add(time.Minute)
		}
		if d.After(last) {
			last = d
		}
	}
	if last.IsZero() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	return context.WithDeadline(context.Background(), last)
}
