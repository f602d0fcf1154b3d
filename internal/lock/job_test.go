package lock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestJobTakeover: a job's run whose node is cut off from Redis (paused,
// as SIGSTOP would) past the lock's TTL is told it lost its lease, and
// another node's turn then runs the job, with a later token; the two runs
// never overlap while both think they hold the lock. The test asserts the
// order of these events, not how long each took: its waits only bound a
// run that never ends.
func TestJobTakeover(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	ns := testinfra.Redis(t)
	node := func() (lock.Locker, *testinfra.Proxy) {
		c, p := redisClient(t, ns.Addr)
		return lock.NewRedis(c, &lock.RedisOptions{TTL: ttl, Prefix: ns.Prefix}), p
	}
	a, proxyA := node()
	b, _ := node()

	var inside atomic.Int32 // runs whose lease is not known lost
	var tokenA, tokenB atomic.Int64
	startedA := make(chan struct{})
	doneA := make(chan error, 1) // why A's run stopped
	onceA := make(chan error, 1) // what Once returned, after the release
	go func() {
		onceA <- lock.Job(func(ctx context.Context, token int64) error {
			inside.Add(1)
			tokenA.Store(token)
			close(startedA)
			<-ctx.Done() // a long run: it ends only when the lease is lost
			inside.Add(-1)
			doneA <- context.Cause(ctx)
			return context.Cause(ctx)
		}).Once(t.Context(), a, "reconcile", false)
	}()
	<-startedA

	ranB := make(chan time.Time, 1)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	go lock.Job(func(ctx context.Context, token int64) error {
		if n := inside.Add(1); n != 1 {
			t.Errorf("%d runs at once", n)
		}
		defer inside.Add(-1)
		tokenB.Store(token)
		select {
		case ranB <- time.Now():
		default:
		}
		return nil
	}).Every(ctx, b, "reconcile", ttl/5, func(err error) { t.Errorf("run on B: %v", err) })

	time.Sleep(ttl) // B's turns find the lock held
	select {
	case <-ranB:
		t.Fatal("B ran while A held the lock")
	default:
	}
	paused := time.Now()
	proxyA.Pause()
	defer proxyA.Resume()
	select {
	case err := <-doneA:
		if !errors.Is(err, lock.ErrLost) {
			t.Errorf("A's run ended with %v, want its lease lost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("A's run went on, 30 seconds past its lease")
	}
	select {
	case at := <-ranB:
		t.Logf("B ran %v after A was cut off; the TTL is %v", at.Sub(paused).Round(time.Millisecond), ttl)
	case <-time.After(30 * time.Second):
		t.Fatal("B never took over")
	}
	proxyA.Resume()
	if err := <-onceA; !errors.Is(err, lock.ErrLost) {
		t.Errorf("A's Once returned %v, want its lease lost", err)
	}
	if tokenB.Load() <= tokenA.Load() {
		t.Errorf("B's token %d is not above A's %d", tokenB.Load(), tokenA.Load())
	}
}
