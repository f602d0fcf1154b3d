package backend_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/testinfra"
)

// tries counts the tries of the test's SETs and GETs, each command or
// pipeline once, as they pass it on their way to the server: added after
// NewRedis's hooks, it sits inside them. A new connection's own commands
// pass it too, and are not counted.
type tries struct{ n atomic.Int32 }

func (h *tries) count(cmd redis.Cmder) {
	if name := cmd.Name(); name == "set" || name == "get" {
		h.n.Add(1)
	}
}

func (h *tries) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tries) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}

func (h *tries) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.count(cmds[0]); return next(ctx, cmds) }
}

// TestRedisWaitsOutFailover: the shop's client talks to a replica, as it
// does to a demoted master in a failover, which refuses writes
// (READONLY). A write with a deadline waits until the server is promoted,
// and succeeds; one without a deadline fails at once, as a background
// job's should; and a pipeline whose answer is nil is not tried again.
func TestRedisWaitsOutFailover(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it turns a redis-server of its own into a replica and back")
	master, replica := testinfra.StartRedis(t), testinfra.StartRedis(t)
	admin := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer admin.Close()
	host, port, _ := net.SplitHostPort(master.Addr())
	if err := admin.ReplicaOf(t.Context(), host, port).Err(); err != nil {
		t.Fatal(err)
	}
	rdb := backend.NewRedis(&redis.UniversalOptions{Addrs: []string{replica.Addr()}})
	defer rdb.Close()
	h := &tries{}
	rdb.AddHook(h)

	if err := rdb.Set(t.Context(), "k", 1, 0).Err(); !redis.IsReadOnlyError(err) {
		t.Fatalf("a write to a replica, without a deadline: %v, want READONLY", err)
	}
	if n := h.n.Swap(0); n != 1 {
		t.Errorf("a write without a deadline was tried %d times, want once", n)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	pipe := rdb.Pipeline()
	get := pipe.Get(ctx, "missing")
	if _, err := pipe.Exec(ctx); !errors.Is(err, redis.Nil) || !errors.Is(get.Err(), redis.Nil) {
		t.Fatalf("a pipeline of a GET of a missing key: %v, %v; want redis.Nil", err, get.Err())
	}
	if n := h.n.Swap(0); n != 1 {
		t.Errorf("a pipeline answered nil was tried %d times, want once", n)
	}

	promoted := make(chan error, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		promoted <- admin.ReplicaOf(context.Background(), "NO", "ONE").Err()
	}()
	if err := rdb.Set(ctx, "k", 1, 0).Err(); err != nil {
		t.Errorf("a write with a deadline, the server promoted meanwhile: %v; want it done", err)
	}
	if err := <-promoted; err != nil {
		t.Fatal(err)
	}
	if n := h.n.Load(); n < 2 {
		t.Errorf("the write was tried %d times, want it tried again once the server was promoted", n)
	}
	if v, err := admin.Get(t.Context(), "k").Result(); v != "1" {
		t.Errorf("k = %q (%v) on the promoted server, want 1", v, err)
	}
}
