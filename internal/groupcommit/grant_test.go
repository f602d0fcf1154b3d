package groupcommit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// TestGrant decides batches from a state read beforehand, with no
// database: the stock and the per-user limit in arrival order, replays,
// repeated keys, reservations of a lost epoch, and buyers who left.
func TestGrant(t *testing.T) {
	t.Parallel()
	buyer := func(user, key string, quantity int) *Request[struct{}] {
		return &Request[struct{}]{Ctx: context.Background(), Order: order.PlaceRequest{SKU: "s", UserID: user, Quantity: quantity, IdempotencyKey: key}}
	}
	reservation := func(user string, epoch int64) *Request[struct{}] {
		p := buyer(user, user, 1)
		p.Epoch = epoch
		return p
	}
	limit := func(n int) Mode { return Mode{Rules: order.Rules{Limit: n}} }
	known := order.Order{ID: 7, SKU: "s", UserID: "kim", Quantity: 1}
	tests := []struct {
		name  string
		mode  Mode
		batch []*Request[struct{}]
		st    batchState
		want  []verdict
		errs  []error // of the refused, in order
		taken int
	}{
		{"stock in arrival order", Mode{}, []*Request[struct{}]{buyer("a", "1", 2), buyer("b", "1", 2), buyer("c", "1", 1)},
			batchState{available: 3}, []verdict{granted, refused, granted}, []error{stock.ErrSoldOut}, 3},
		{"replay and repeat", Mode{}, []*Request[struct{}]{buyer("kim", "k", 1), buyer("ann", "x", 1), buyer("ann", "x", 1)},
			batchState{available: 5}, []verdict{replayed, granted, repeated}, nil, 1},
		{"per-user limit", limit(2), []*Request[struct{}]{buyer("ann", "1", 1), buyer("ann", "2", 1), buyer("bob", "1", 2)},
			batchState{available: 9, held: map[string]int{"ann": 1}}, []verdict{granted, refused, granted}, []error{order.ErrLimitReached}, 3},
		{"lost epoch", Mode{Held: true}, []*Request[struct{}]{reservation("a", 2), reservation("b", 1), reservation("c", 2)},
			batchState{available: 9, epoch: 2}, []verdict{granted, refused, granted}, []error{stock.ErrBusy}, 2},
		{"a buyer who left takes nothing; its key's next request does", Mode{}, []*Request[struct{}]{abandoned(buyer("ann", "x", 1)), buyer("ann", "x", 1), buyer("bob", "1", 1)},
			batchState{available: 1}, []verdict{refused, granted, refused}, []error{stock.ErrBusy, stock.ErrSoldOut}, 1},
		{"held units are settled, waited for or not", Mode{Held: true}, []*Request[struct{}]{abandoned(reservation("a", 1))},
			batchState{available: 9, epoch: 1}, []verdict{granted}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := grant(tt.mode, "s", tt.batch, map[order.UserKey]order.Order{{User: "kim", Key: "k"}: known}, tt.st, time.Now())
			var errs []error
			for i, d := range g.decisions {
				if d.verdict != tt.want[i] {
					t.Errorf("buyer %d: verdict %d, want %d", i, d.verdict, tt.want[i])
				}
				if d.verdict == refused {
					errs = append(errs, d.err)
				}
				if d.verdict == repeated && d.first != i-1 {
					t.Errorf("buyer %d repeats buyer %d, want %d", i, d.first, i-1)
				}
				if d.verdict == replayed && d.o.ID != known.ID {
					t.Errorf("buyer %d replays order %d, want %d", i, d.o.ID, known.ID)
				}
			}
			if len(errs) != len(tt.errs) {
				t.Fatalf("refused %v, want %v", errs, tt.errs)
			}
			for i, err := range errs {
				if !errors.Is(err, tt.errs[i]) {
					t.Errorf("refusal %d: %v, want %v", i, err, tt.errs[i])
				}
			}
			if g.taken != tt.taken {
				t.Errorf("taken %d, want %d", g.taken, tt.taken)
			}
		})
	}
	if g := grant(limit(3), "s", []*Request[struct{}]{buyer("ann", "1", 1), buyer("ann", "2", 1)}, nil, batchState{available: 9, held: map[string]int{"ann": 1}}, time.Now()); g.holdings["ann"] != 3 {
		t.Errorf("ann holds %d after two units more than 1, want 3", g.holdings["ann"])
	}
}

// abandoned is p once its buyer has stopped waiting.
func abandoned[M any](p *Request[M]) *Request[M] {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Ctx = ctx
	return p
}
