package testinfra_test

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stockguard/shop/internal/testinfra"
)

func TestEtcd(t *testing.T) {
	t.Parallel()
	var key string
	t.Run("namespace", func(t *testing.T) {
		a, b := testinfra.Etcd(t), testinfra.Etcd(t)
		if a.Prefix == b.Prefix || !strings.HasPrefix(a.Prefix, "test/") {
			t.Errorf("prefixes %q and %q: want two different test/<random>/ prefixes", a.Prefix, b.Prefix)
		}
		key = a.Prefix + "locks/sku-1"
		if _, err := newEtcd(t, a.Endpoints).Put(t.Context(), key, "holder"); err != nil {
			t.Fatal(err)
		}
	})

	// The subtest's cleanup has run.
	resp, err := newEtcd(t, testinfra.Etcd(t).Endpoints).Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("key %s still exists after cleanup", key)
	}
}

func TestStartEtcd(t *testing.T) {
	t.Parallel()
	s := testinfra.StartEtcd(t)
	c := newEtcd(t, []string{s.Addr()})
	put, err := c.Put(t.Context(), "fence", "token")
	if err != nil {
		t.Fatal(err)
	}

	s.Kill()
	s.Start()
	resp, err := c.Get(t.Context(), "fence")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != put.Header.Revision {
		t.Errorf("after Kill and Start: fence = %v; want the key written at revision %d", resp.Kvs, put.Header.Revision)
	}
}

// newEtcd returns a client, closed at cleanup.
func newEtcd(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStartEtcdCluster(t *testing.T) {
	t.Parallel()
	e := testinfra.StartEtcdCluster(t)
	c := newEtcd(t, e.Addrs())
	if _, err := c.Put(t.Context(), "before", "kill"); err != nil {
		t.Fatal(err)
	}
	killed, election := e.KillLeader()
	t.Logf("a new leader in %v", election)
	if e.Leader() == killed {
		t.Fatal("the killed member still leads")
	}
	if _, err := c.Put(t.Context(), "after", "kill"); err != nil {
		t.Errorf("put with two members of three: %v", err)
	}
	e.Restore()
	restored := newEtcd(t, []string{killed.Addr()})
	testinfra.WaitFor(t, "the restored member to have the write made while it was down", func() bool {
		resp, err := restored.Get(t.Context(), "after", clientv3.WithSerializable())
		return err == nil && len(resp.Kvs) == 1
	})
}
