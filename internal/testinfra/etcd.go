package testinfra

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdImage is the etcd release that the container runs.
const etcdImage = "gcr.io/etcd-development/etcd:v3.6.16"

var sharedEtcd = shared{
	name: "etcd",
	env:  "SHOP_TEST_ETCD_ADDR",
	container: onceContainer(etcdImage, "2379/tcp", wait.ForHTTP("/health").WithPort("2379/tcp"),
		testcontainers.WithCmd("/usr/local/bin/etcd",
			"--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://127.0.0.1:2379")),
}

// EtcdNamespace is a test's share of an etcd cluster.
type EtcdNamespace struct {
	Endpoints []string // host:port of each member
	Prefix    string   // "test/<random>/"; the test's keys must start with it
}

// Etcd returns the endpoints of a real etcd cluster and a key prefix unique
// to this test. Keys under the prefix are deleted at cleanup.
func Etcd(t testing.TB) EtcdNamespace {
	t.Helper()
	ns := EtcdNamespace{
		Endpoints: strings.Split(sharedEtcd.locate(t), ","),
		Prefix:    randomName("test/") + "/",
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := etcdHealthy(ctx, ns.Endpoints[0]); err != nil {
		t.Fatalf("testinfra: etcd at %s: %v", ns.Endpoints[0], err)
	}
	cleanup(t, "delete etcd keys "+ns.Prefix+"*", func(ctx context.Context) error { return deletePrefix(ctx, ns) })
	return ns
}

func deletePrefix(ctx context.Context, ns EtcdNamespace) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: ns.Endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Delete(ctx, ns.Prefix, clientv3.WithPrefix())
	return err
}

// etcdHealthy asks a member's /health, which answers true once the member
// has a leader and serves requests.
func etcdHealthy(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("/health answered %s: %s", resp.Status, body)
	}
	return nil
}

// StartEtcd starts a private single-member etcd on free loopback ports,
// with a data dir of its own; it is killed at cleanup.
//
// Its data survives Stop, Kill and Start, unless Empty deletes it: etcd
// syncs its log before it answers a write.
func StartEtcd(t testing.TB) *Server {
	t.Helper()
	return startNew(t, func() []*Server { return etcdMembers(t, 1) })[0]
}

// StartEtcdCluster starts a private etcd cluster of three members on free
// loopback ports, with etcd's default election timeout (1s), and returns
// once it has a leader. Its members are killed at cleanup.
func StartEtcdCluster(t testing.TB) *Ensemble {
	t.Helper()
	e := &Ensemble{t: t, name: "etcd cluster", servers: startNew(t, func() []*Server { return etcdMembers(t, 3) })}
	c, err := clientv3.New(clientv3.Config{Endpoints: e.Addrs(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	e.leads = func(ctx context.Context, s *Server) (bool, error) {
		st, err := c.Status(ctx, s.Addr())
		if err != nil {
			return false, err
		}
		return st.Leader != 0 && st.Leader == st.Header.MemberId, nil
	}
	e.Leader()
	return e
}

// etcdMembers prepares n members of one cluster, not started.
func etcdMembers(t testing.TB, n int) []*Server {
	t.Helper()
	skipShort(t, "etcd server processes of the test's own")
	bin := lookPath(t, "etcd", "etcd-server")
	members := make([]*Server, n)
	peers := make([]string, n)
	var cluster []string
	for i := range members {
		dir := t.TempDir()
		members[i] = newServer(t, "etcd", freeAddr(t), dir, 60*time.Second)
		members[i].data = filepath.Join(dir, "data")
		peers[i] = "http://" + freeAddr(t)
		cluster = append(cluster, fmt.Sprintf("m%d=%s", i, peers[i]))
	}
	token := randomName("cluster-")
	for i, s := range members {
		client := "http://" + s.addr
		s.command = func() *exec.Cmd {
			return exec.Command(bin, fmt.Sprintf("--name=m%d", i), "--data-dir="+s.data,
				"--listen-client-urls="+client, "--advertise-client-urls="+client,
				"--listen-peer-urls="+peers[i], "--initial-advertise-peer-urls="+peers[i],
				"--initial-cluster="+strings.Join(cluster, ","), "--initial-cluster-state=new",
				"--initial-cluster-token="+token)
		}
		s.ready = func(ctx context.Context) error { return etcdHealthy(ctx, s.addr) }
	}
	return members
}
