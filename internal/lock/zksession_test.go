package lock_test

import (
	"context"
	"io"
	"log"
	"log/slog"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestZKConnAfterEmptyRestart: a private ZooKeeper restarted without its
// data refuses the shop's connection at every reconnect, since the
// connection has seen later zxids than the ensemble now has. ZKConn
// replaces the connection, and the lock is taken again.
func TestZKConnAfterEmptyRestart(t *testing.T) {
	t.Parallel()
	srv := testinfra.StartZooKeeper(t)
	conn, err := lock.NewZKConn(func(onEvent func(zk.Event)) (*zk.Conn, error) {
		c, _, err := zk.Connect([]string{srv.Addr()}, 2*time.Second,
			zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithEventCallback(onEvent))
		return c, err
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	locker, err := lock.NewZooKeeperOn(conn, &lock.ZooKeeperOptions{Root: "/locks"})
	if err != nil {
		t.Fatal(err)
	}
	take := func(timeout time.Duration) (int64, error) {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		l, err := locker.Acquire(ctx, "sku")
		if err != nil {
			return 0, err
		}
		return l.Token(), l.Release(ctx)
	}
	var before int64
	for range 20 { // zxids the restarted server has not reached
		if before, err = take(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	srv.Empty()
	srv.Start()

	deadline := time.Now().Add(time.Minute)
	for {
		token, err := take(2 * time.Second)
		if err == nil {
			if token >= before {
				t.Errorf("token %d after the restart, want below %d: the ensemble kept its data", token, before)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lock a minute after the restart: %v", err)
		}
	}
	if _, gen := conn.Conn(); gen != 1 {
		t.Errorf("connection replaced %d times, want once", gen)
	}
}
