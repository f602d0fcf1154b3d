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
// replaces the connection, and the lock is taken again, and again on the
// same connection. A server that is still starting refuses handshakes
// too, and on a loaded machine it may take long enough to count for a
// replacement: the connection may be replaced more than once, but not
// once the lock is taken.
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
		if before, err = take(wait); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	srv.Empty()
	srv.Start()

	// Attempts go on until one, on the new connection, takes the lock.
	deadline := time.Now().Add(restartWait)
	for {
		token, err := take(attempt)
		if err == nil {
			if token >= before {
				t.Errorf("token %d after the restart, want below %d: the ensemble kept its data", token, before)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lock %v after the restart: %v", restartWait, err)
		}
	}
	_, gen := conn.Conn()
	if gen < 1 {
		t.Fatalf("the lock was taken again on the refused connection")
	}
	if _, err := take(attempt); err != nil {
		t.Fatal(err)
	}
	if _, again := conn.Conn(); again != gen {
		t.Errorf("connection replaced again, %d times in all, after the lock was taken on it", again)
	}
	t.Logf("connection replaced %d times", gen)
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
	take := func(timeout time.Duration) (*lock.Lease, error) {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		return locker.Acquire(ctx, "sku")
	}
	if _, err := take(wait); err != nil { // held until its session ends
		t.Fatal(err)
	}
	srv.Kill()
	srv.Empty()
	srv.Start()
	var lease *lock.Lease
	for deadline := time.Now().Add(restartWait); ; {
		if lease, err = take(attempt); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lock %v after the restart: %v", restartWait, err)
		}
	}
	if _, gen := conn.Conn(); gen < 1 {
		t.Fatalf("the lock was taken again on the refused connection")
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

// attempt bounds one attempt to take the lock after the server restarted
// empty: one made on the old connection, refused at every reconnect, may
// wait for as long as that connection lasts. One on the new connection
// takes well under a second on a quiet machine; the rest is a loaded
// machine's margin.
const attempt = 10 * time.Second

// restartWait bounds the wait for the lock after the server restarted
// empty. go-zookeeper waits for the answer to a handshake for ten times
// two thirds of the session timeout, 67 s with hold, and a server still
// starting on a loaded machine took a connection and left it unanswered
// that long: the attempts go on for twice that.
const restartWait = 2 * 10 * hold * 2 / 3

// dialZK dials addr, as NewZKConn asks, with a hold session: the holders
// of these tests keep their locks until they release them.
func dialZK(addr string) func(onEvent func(zk.Event)) (*zk.Conn, error) {
	return func(onEvent func(zk.Event)) (*zk.Conn, error) {
		c, _, err := zk.Connect([]string{addr}, hold,
			zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithEventCallback(onEvent))
		return c, err
	}
}
