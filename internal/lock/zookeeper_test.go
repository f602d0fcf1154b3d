package lock_test

import (
	"context"
	"io"
	"log"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestZooKeeperReleaseAfterLostConnection: a holder releases while its
// connection is down, and then connects again to the same session, as a
// shop paused for less than its session timeout does. Its node must still
// go: in the live session it would hold the lock for as long as the
// process lives, and every later contender would wait behind it.
func TestZooKeeperReleaseAfterLostConnection(t *testing.T) {
	t.Parallel()
	ns := testinfra.ZooKeeper(t)
	p := testinfra.StartProxy(t, ns.Addrs[0])
	// A session long enough to outlive the cut: the server keeps it.
	conn, _, err := zk.Connect([]string{p.Addr()}, 20*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	holder, err := lock.NewZooKeeper(conn, &lock.ZooKeeperOptions{Root: ns.Root})
	if err != nil {
		t.Fatal(err)
	}
	lease := acquire(t, &client{Locker: holder}, "cut")
	session := conn.SessionID()

	p.Cut()
	t.Logf("released with the connection down: %v", lease.Release(context.WithoutCancel(t.Context())))
	p.Mend()
	for end := time.Now().Add(15 * time.Second); conn.State() != zk.StateHasSession; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the holder did not connect again within 15s: %s", conn.State())
		}
	}
	if conn.SessionID() != session {
		t.Fatalf("the holder's session changed (%x to %x): the server deleted its node, and the test shows nothing", session, conn.SessionID())
	}

	other, _ := zkConn(t, ns.Addrs[0], hold, nil)
	next, err := lock.NewZooKeeper(other, &lock.ZooKeeperOptions{Root: ns.Root})
	if err != nil {
		t.Fatal(err)
	}
	// A node left behind would hold the lock for as long as the holder's
	// session lives, the whole test: wait only bounds that.
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	l, err := next.Acquire(ctx, "cut")
	if err != nil {
		t.Fatalf("the lock released by a holder whose connection was down is still held, its session alive: %v", err)
	}
	_ = l.Release(t.Context())
}
