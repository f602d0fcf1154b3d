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
// another node's turn then runs the job, with a later token, which a store
// that fences orders after the first run's. The test asserts the order of
// these events, not how long each took: its waits only bound a run that
// never ends.
//
// The lease is hold, so that A keeps the lock, on a loaded machine too,
// until the test cuts it off. Nor does the test ask that A learn of its
// loss before B's run starts: A's watchdog gives the lease up a drift
// (1% of the TTL) before Redis expires the key, but a loaded machine can
// run A's watchdog later than that, which is why a job's writes carry its
// token.
func TestJobTakeover(t *testing.T) {
	t.Parallel()
	ns := testinfra.Redis(t)
	node := func() (lock.Locker, *testinfra.Proxy) {
		c, p := redisClient(t, ns.Addr)
		return lock.NewRedis(c, &lock.RedisOptions{TTL: hold, Prefix: ns.Prefix}), p
	}
	a, proxyA := node()
	nodeB, _ := node()
	b := &refusals{Locker: nodeB}

	var tokenA, tokenB atomic.Int64
	startedA := make(chan struct{})
	doneA := make(chan error, 1) // why A's run stopped
	onceA := make(chan error, 1) // what Once returned, after the release
	go func() {
		onceA <- lock.Job(func(ctx context.Context, token int64) error {
			tokenA.Store(token)
			close(startedA)
			<-ctx.Done() // a long run: it ends only when the lease is lost
			doneA <- context.Cause(ctx)
			return context.Cause(ctx)
		}).Once(t.Context(), a, "reconcile", false)
	}()
	<-startedA

	ranB := make(chan time.Time, 1)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	go lock.Job(func(ctx context.Context, token int64) error {
		tokenB.Store(token)
		select {
		case ranB <- time.Now():
		default:
		}
		return nil
	}).Every(ctx, b, "reconcile", 200*time.Millisecond, func(err error) { t.Errorf("run on B: %v", err) })

	// B's turns find the lock held: three of them, so that B has tried
	// while A's lease was renewed.
	for deadline := time.Now().Add(wait); b.locked.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("B's turns found the lock held %d times in %v, want 3", b.locked.Load(), wait)
		}
	}
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
	case <-time.After(wait):
		t.Fatalf("A's run went on, %v past its lease", wait)
	}
	select {
	case at := <-ranB:
		t.Logf("B ran %v after A was cut off; the TTL is %v", at.Sub(paused).Round(time.Millisecond), hold)
	case <-time.After(wait):
		t.Fatal("B never took over")
	}
	proxyA.Resume()
	if err := <-onceA; !errors.Is(err, lock.ErrLost) {
		t.Errorf("A's Once returned %v, want its lease lost", err)
	}
	if tokenB.Load() <= tokenA.Load() {
		t.Errorf("B's token %d is not above A's %d: a store that fences would refuse B's writes after A's", tokenB.Load(), tokenA.Load())
	}
}

// refusals is a Locker that counts the attempts that found the lock held.
type refusals struct {
	lock.Locker
	locked atomic.Int32
}

func (r *refusals) TryAcquire(ctx context.Context, name string) (*lock.Lease, error) {
	l, err := r.Locker.TryAcquire(ctx, name)
	if errors.Is(err, lock.ErrLocked) {
		r.locked.Add(1)
	}
	return l, err
}

// TestJobRunOutlivedItsLease: a run whose lease ran out, and whose lock
// another node took, ends before any renewal tells it so, as a process
// paused past the TTL may when it resumes. Its release finds the lock
// another's, and Once reports the run lost. Before, only a renewal could
// tell it, and such a run was reported as a success.
func TestJobRunOutlivedItsLease(t *testing.T) {
	t.Parallel()
	ns := testinfra.Redis(t)
	c, _ := redisClient(t, ns.Addr)
	a := lock.NewRedis(c, &lock.RedisOptions{TTL: hold, Prefix: ns.Prefix})
	b := lock.NewRedis(c, &lock.RedisOptions{TTL: hold, Prefix: ns.Prefix})
	err := lock.Job(func(ctx context.Context, _ int64) error {
		// The lease runs out (its key is gone, as when the TTL ends), and
		// another node takes the lock.
		keys, err := c.Keys(ctx, ns.Prefix+"{job:expiry}").Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("the job's lock key: %v, %v", keys, err)
		}
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
		other, err := b.TryAcquire(ctx, "job:expiry")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Release(context.WithoutCancel(ctx)) })
		return nil
	}).Once(t.Context(), a, "expiry", false)
	if !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("a run that outlived its lease: %v, want it reported lost (lock: not held)", err)
	}
}
