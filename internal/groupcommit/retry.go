package groupcommit

import (
	"context"
	"fmt"
	"time"

	"github.com/stockguard/shop/internal/backoff"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// Held requests tried again. A request of Request.Retry holds units that
// only its caller's process would persist soon (Mode.Held): when its
// batch cannot commit before its buyers stop waiting, as when the database
// is out for longer than a request's deadline, the writer does not drop
// it, but queues it again for a later batch of its SKU, after a backoff,
// until one commits it. Its caller hears of that batch as of any other
// (AfterCommit), and a buyer's retry may wait for it (Request.Wait). Close
// ends the retries: what they held is left to the caller's recovery. See
// docs/strategies.md#through-a-database-outage.

const (
	// retryLimit bounds the backoff before a held request is tried again:
	// once the database takes writes again, the request commits within
	// about that, in its next batch.
	retryLimit = 250 * time.Millisecond
	// retryBatch bounds how long a retry keeps its batch going, as a
	// buyer's deadline bounds its own: a statement held by a stalled
	// server is given up, and tried again on a new connection.
	retryBatch = time.Second
)

// retryState is what a request tried again keeps: the ctx of its retry's
// batch, and how many batches it has failed in.
type retryState struct {
	ctx    context.Context // nil until it is first tried again
	cancel context.CancelFunc
	tries  int
}

// stop ends the ctx of the request's last retry, if any.
func (s *retryState) stop() {
	if s.cancel != nil {
		s.cancel()
	}
}

// waiting is the ctx the request's batch waits on: its buyer's, or once
// it is tried again, its retry's.
func (r *Request[M]) waiting() context.Context {
	if r.retry.ctx != nil {
		return r.retry.ctx
	}
	return r.Ctx
}

// again queues reqs, held requests of sku whose batch did not commit, for
// a later batch, after a backoff that grows with their failures. Once the
// writer is closing, it answers them busy.
func (w *Writer[M]) again(sku string, reqs []*Request[M]) {
	tries := 0
	for _, p := range reqs {
		p.retry.tries++
		tries = max(tries, p.retry.tries)
	}
	queued := w.retries.Go(func(ctx context.Context) {
		if backoff.WaitUpTo(ctx, tries, retryLimit) != nil {
			closing(reqs)
			return
		}
		for _, p := range reqs {
			p.retry.stop()
			p.retry.ctx, p.retry.cancel = context.WithTimeout(ctx, retryBatch)
			if w.skus.Add(sku, p) != nil {
				closing([]*Request[M]{p})
			}
		}
	})
	if !queued {
		closing(reqs)
	}
}

// closing answers reqs busy: the writer closed before they committed.
func closing[M any](reqs []*Request[M]) {
	for _, p := range reqs {
		p.end(order.Answer{Err: fmt.Errorf("order: place: %w: %w", stock.ErrBusy, order.ErrClosed)})
	}
}
