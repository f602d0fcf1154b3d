package lock_test

import (
	"context"
	"io"
	"log"
	"log/slog"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

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
	conn, err := lock.NewZKConn(dialZK(srv.Addr()), slog.New(slog.DiscardHandler))
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

// TestZKConnCloseEndsItsWork: the server comes back without its data, and
// the connection is replaced; then it goes down again while a holder
// releases, so the release is sent again in the background, until Close
// ends the session. Close returns, and leaves no goroutine behind. Not
// parallel: it compares the process's goroutines.
func TestZKConnCloseEndsItsWork(t *testing.T) {
	srv := testinfra.StartZooKeeper(t)
	before := goleak.IgnoreCurrent()
	conn, err := lock.NewZKConn(dialZK(srv.Addr()), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	locker, err := lock.NewZooKeeperOn(conn, &lock.ZooKeeperOptions{Root: "/locks"})
	if err != nil {
		t.Fatal(err)
	}
	take := func() (*lock.Lease, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		return locker.Acquire(ctx, "sku")
	}
	if _, err := take(); err != nil { // held until its session ends
		t.Fatal(err)
	}
	srv.Kill()
	srv.Empty()
	srv.Start()
	var lease *lock.Lease
	for deadline := time.Now().Add(time.Minute); ; {
		if lease, err = take(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lock a minute after the restart: %v", err)
		}
	}
	if _, gen := conn.Conn(); gen != 1 {
		t.Fatalf("connection replaced %d times, want once", gen)
	}
	srv.Kill()
	if err := lease.Release(t.Context()); err != nil {
		t.Fatalf("release with the server down: %v, want it sent again in the background", err)
	}
	closed := make(chan struct{})
	go func() { conn.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close has not returned after 30s: the work of a session outlives it")
	}
	// The restarted server's process is waited for by a goroutine of testinfra.
	goleak.VerifyNone(t, before, goleak.IgnoreAnyFunction(testinfra.ServerWaiter))
}

// dialZK dials addr with a 2s session, as NewZKConn asks.
func dialZK(addr string) func(onEvent func(zk.Event)) (*zk.Conn, error) {
	return func(onEvent func(zk.Event)) (*zk.Conn, error) {
		c, _, err := zk.Connect([]string{addr}, 2*time.Second,
			zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithEventCallback(onEvent))
		return c, err
	}
}
