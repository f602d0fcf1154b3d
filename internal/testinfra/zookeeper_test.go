package testinfra_test

import (
	"errors"
	"io"
	"log"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/testinfra"
)

func TestZooKeeper(t *testing.T) {
	t.Parallel()
	var root string
	t.Run("namespace", func(t *testing.T) {
		ns := testinfra.ZooKeeper(t)
		root = ns.Root
		conn := connectZK(t, ns.Addrs)
		// A tree below the root, with an ephemeral leaf as a lock would leave.
		if err := lock.MkdirAll(conn, root+"/locks/sku-1"); err != nil {
			t.Fatal(err)
		}
		create(t, conn, root+"/locks/sku-1/lock-", zk.FlagEphemeral|zk.FlagSequence)
	})

	// The subtest's cleanup has run.
	conn := connectZK(t, testinfra.ZooKeeper(t).Addrs)
	if ok, _, err := conn.Exists(root); err != nil || ok {
		t.Errorf("%s exists after cleanup: %v, %v", root, ok, err)
	}
}

func TestStartZooKeeper(t *testing.T) {
	t.Parallel()
	s := testinfra.StartZooKeeper(t)
	create(t, connectZK(t, []string{s.Addr()}), "/fence", 0)

	s.Stop()
	s.Start()
	if ok, _, err := connectZK(t, []string{s.Addr()}).Exists("/fence"); err != nil || !ok {
		t.Errorf("after Stop and Start: /fence exists = %v, %v; want it kept", ok, err)
	}
}

func create(t *testing.T, conn *zk.Conn, path string, flags int32) {
	t.Helper()
	if _, err := conn.Create(path, nil, flags, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
}

// connectZK returns a connection with a session, closed at cleanup.
func connectZK(t *testing.T, addrs []string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(addrs, 5*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-timeout:
			t.Fatalf("no ZooKeeper session with %v", addrs)
		}
	}
}

func TestStartZooKeeperEnsemble(t *testing.T) {
	t.Parallel()
	e := testinfra.StartZooKeeperEnsemble(t)
	conn := connectZK(t, e.Addrs())
	create(t, conn, "/before", 0)
	killed, election := e.KillLeader()
	t.Logf("a new leader in %v", election)
	if e.Leader() == killed {
		t.Fatal("the killed server still leads")
	}
	testinfra.WaitFor(t, "a write after the election", func() bool {
		_, err := conn.Create("/after", nil, 0, zk.WorldACL(zk.PermAll))
		return err == nil || errors.Is(err, zk.ErrNodeExists)
	})
	e.Restore()
	if ok, _, err := connectZK(t, []string{killed.Addr()}).Exists("/after"); err != nil || !ok {
		t.Errorf("restored server: /after exists = %v, %v; want it there", ok, err)
	}
}
