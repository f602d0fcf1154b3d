package lesson

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

// TestStarveTrialFair: a run in which the fixed interval served every
// buyer in turn, as fair as the queue, does not reproduce the failure,
// and says so: `shop lesson` then exits non-zero.
func TestStarveTrialFair(t *testing.T) {
	t.Parallel()
	inTurn := loadtest.Fairness{FirstComeShare: 1, LatestWinnerRank: 10, Winners: 10}
	late := loadtest.Fairness{FirstComeShare: 0.5, Overtakes: 30, OvertakesPer1000: 3000, LatestWinnerRank: 19, Winners: 10}
	tr := starveTrial("fixed, then random", way{"fixed interval", "fixed", inTurn}, way{"random wait", "jittered", late})
	if tr.Failed || !strings.Contains(tr.Happened, "no less fair than the queue") {
		t.Errorf("a fair fixed interval: failed %v, %q; want not failed, and said", tr.Failed, tr.Happened)
	}
	if tr := starveTrial("fixed, then random", way{"fixed interval", "fixed", late}, way{"random wait", "jittered", inTurn}); !tr.Failed {
		t.Errorf("a fixed interval with overtakes: %+v, want failed", tr)
	}
	if tr := starveTrial("queue", way{"arrival queue", "queue", late}); !tr.Failed {
		t.Errorf("a queue with overtakes: %+v, want failed (the fix did not hold)", tr)
	}
	// Two buyers within the gap taken in either order are no overtake.
	swapped := loadtest.Fairness{FirstComeShare: 0.9, LatestWinnerRank: 11, Winners: 10}
	if tr := starveTrial("queue", way{"arrival queue", "queue", swapped}); tr.Failed {
		t.Errorf("a queue that swapped two buyers 3 ms apart: %+v, want held", tr)
	}
}

// TestQueueServesArrivalsWhenRequestsLag: on a loaded machine a buyer's
// first request can reach the lock service's store after the request of
// a buyer due after it. Here each buyer's request waits up to 30 ms
// before it leaves, as a goroutine starved of CPU would. The queue serves
// the buyers in the order the store took them, and the lesson, which
// measures arrivals there, finds no overtake.
func TestQueueServesArrivalsWhenRequestsLag(t *testing.T) {
	t.Parallel()
	ns := testinfra.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: ns.Addr})
	defer c.Close()
	lagging := func(ctx context.Context, c *redis.Client, sale string, rank int) (func() error, time.Time, error) {
		time.Sleep(rand.N(30 * time.Millisecond))
		return ticketQueue(ctx, c, sale, rank)
	}
	f, err := starve(t.Context(), &Env{Redis: c, Prefix: ns.Prefix}, "lagging", lagging)
	if err != nil {
		t.Fatal(err)
	}
	if f.Overtakes > 0 || f.Winners != starveStock {
		t.Errorf("the queue, its requests lagging: %d overtakes, %d winners; want 0 and %d", f.Overtakes, f.Winners, starveStock)
	}
}
