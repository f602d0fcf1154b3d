package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestEtcdTokensSurviveRestart: the tokens are etcd's revisions, which the
// server keeps on disk, so they keep increasing after a crash of the
// server, where a counter held in memory would start again.
func TestEtcdTokensSurviveRestart(t *testing.T) {
	t.Parallel()
	s := testinfra.StartEtcd(t)
	c, _ := etcdClient(t, s.Addr())
	e, err := lock.NewEtcd(c, &lock.EtcdOptions{TTL: hold})
	if err != nil {
		t.Fatal(err)
	}
	name := lockName(t)
	before := acquire(t, &client{Locker: e}, name)
	release(t, before)

	s.Kill()
	s.Start()
	after := acquire(t, &client{Locker: e}, name)
	if after.Token() <= before.Token() {
		t.Errorf("token %d after the restart, %d before", after.Token(), before.Token())
	}
	release(t, after)
}

func TestNewEtcdNeedsClient(t *testing.T) {
	t.Parallel()
	if _, err := lock.NewEtcd(nil, nil); err == nil {
		t.Fatal("NewEtcd with a nil client: no error")
	}
}

// TestEtcdAwaitDelete: a waiter's watch starts at the current revision,
// so a delete that came before it must be seen by the read that follows,
// and one that comes after by the watch. Without the read the first wait
// never ends. The deadline only keeps a failing wait from hanging the test.
func TestEtcdAwaitDelete(t *testing.T) {
	t.Parallel()
	ns := testinfra.Etcd(t)
	c, _ := etcdClient(t, ns.Endpoints[0])
	e, err := lock.NewEtcd(c, &lock.EtcdOptions{Prefix: ns.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	gone := ns.Prefix + "gone"
	if _, err := c.Put(ctx, gone, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := e.AwaitDelete(ctx, gone); err != nil {
		t.Errorf("a key deleted before the wait: %v", err)
	}

	later := ns.Prefix + "later"
	if _, err := c.Put(ctx, later, ""); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.AwaitDelete(ctx, later) }()
	// Writes to other keys move the revision on while the waiter starts.
	for i := range 20 {
		if _, err := c.Put(ctx, ns.Prefix+"other", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the wait ended while the key was there: %v", err)
	default:
	}
	if _, err := c.Delete(ctx, later); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("a key deleted during the wait: %v", err)
	}
}
