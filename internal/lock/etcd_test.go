package lock_test

import (
	"testing"

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
	e, err := lock.NewEtcd(c, &lock.EtcdOptions{TTL: ttl})
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
