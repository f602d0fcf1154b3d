package testinfra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/stockguard/shop/internal/lock"
)

var sharedZooKeeper = shared{
	name:      "ZooKeeper",
	env:       "SHOP_TEST_ZK_ADDR",
	container: onceContainer("zookeeper:3.9", "2181/tcp", wait.ForListeningPort("2181/tcp")),
}

// zkTestRoot holds every test's root, so that leftovers are easy to find.
const zkTestRoot = "/stockguard-test"

// ZooKeeperNamespace is a test's share of a ZooKeeper ensemble.
type ZooKeeperNamespace struct {
	Addrs []string // host:port of each server
	Root  string   // "/stockguard-test/<random>"; exists, and holds the test's znodes
}

// ZooKeeper returns the server addresses and a znode root unique to this
// test. The root is created now and deleted, with everything below it, at
// cleanup.
func ZooKeeper(t testing.TB) ZooKeeperNamespace {
	t.Helper()
	ns := ZooKeeperNamespace{
		Addrs: strings.Split(sharedZooKeeper.locate(t), ","),
		Root:  path.Join(zkTestRoot, randomName("")),
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := zkConnect(ctx, ns.Addrs)
	if err != nil {
		t.Fatalf("testinfra: ZooKeeper at %s: %v", strings.Join(ns.Addrs, ","), err)
	}
	defer conn.Close()
	if err := lock.MkdirAll(conn, ns.Root); err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	cleanup(t, "delete znode "+ns.Root, func(ctx context.Context) error {
		conn, err := zkConnect(ctx, ns.Addrs)
		if err != nil {
			return err
		}
		defer conn.Close()
		return deleteTree(conn, ns.Root)
	})
	return ns
}

// zkConnect returns a connection that has a session. zk.Connect alone
// returns at once and retries forever in the background.
func zkConnect(ctx context.Context, addrs []string) (*zk.Conn, error) {
	// The client's reconnection chatter would only clutter test output.
	conn, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		return nil, err
	}
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("no session: %w", ctx.Err())
		}
	}
}

// deleteTree deletes p and everything below it.
func deleteTree(conn *zk.Conn, p string) error {
	children, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := deleteTree(conn, path.Join(p, c)); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// Where Debian's libzookeeper-java and libslf4j-java put their jars;
// slf4j-simple sends the server's log to stderr, so into the log file.
const (
	zookeeperJar = "/usr/share/java/zookeeper.jar"
	slf4jJar     = "/usr/share/java/slf4j-simple.jar"
)

// StartZooKeeper starts a private standalone ZooKeeper on a free loopback
// port, with Debian's jars and a small JVM heap; it is killed at cleanup.
//
// Its tick is 500ms, so sessions may be as short as one second and tests
// of session expiry stay fast.
func StartZooKeeper(t testing.TB) *Server {
	t.Helper()
	return startNew(t, func() []*Server { return zkServers(t, 1, "tickTime=500\n") })[0]
}

// StartZooKeeperEnsemble starts a private ensemble of three ZooKeeper
// servers on free loopback ports, and returns once it has a leader. Its
// tick is 200ms and a follower gives up on a silent leader after five
// (syncLimit), so that an election takes about a second; sessions may
// still be as short as one second. Its servers are killed at cleanup.
func StartZooKeeperEnsemble(t testing.TB) *Ensemble {
	t.Helper()
	e := &Ensemble{t: t, name: "ZooKeeper ensemble"}
	e.servers = startNew(t, func() []*Server {
		peers := ""
		for i := range 3 {
			peers += fmt.Sprintf("server.%d=%s:%s\n", i+1, freeAddr(t), port(freeAddr(t)))
		}
		return zkServers(t, 3, "tickTime=200\ninitLimit=10\nsyncLimit=5\n"+peers)
	})
	e.leads = func(ctx context.Context, s *Server) (bool, error) {
		answer, err := srvr(ctx, s.Addr())
		return strings.Contains(answer, "\nMode: leader\n"), err
	}
	e.Leader()
	return e
}

// zkServers prepares n servers of one ensemble, not started, each with
// config added to its own. A server of an ensemble finds its number in
// the file myid of its data dir.
func zkServers(t testing.TB, n int, config string) []*Server {
	t.Helper()
	skipShort(t, "ZooKeeper server processes of the test's own")
	java := lookPath(t, "java", "default-jre-headless")
	for _, jar := range []string{zookeeperJar, slf4jJar} {
		if _, err := os.Stat(jar); err != nil {
			t.Fatalf("testinfra: %v: install the Debian package libzookeeper-java (scripts/services.sh up does)", err)
		}
	}
	servers := make([]*Server, n)
	for i := range servers {
		dir := t.TempDir()
		s := newServer(t, "zookeeper", freeAddr(t), dir, 60*time.Second)
		s.data = filepath.Join(dir, "data")
		// The AdminServer is off: it would listen on 8080 in every instance.
		// srvr tells a test which server leads.
		full := fmt.Sprintf(`minSessionTimeout=1000
maxSessionTimeout=60000
dataDir=%s
clientPort=%s
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr
`, s.data, port(s.addr)) + config
		configPath := filepath.Join(dir, "zoo.cfg")
		if err := os.WriteFile(configPath, []byte(full), 0o644); err != nil {
			t.Fatalf("testinfra: %v", err)
		}
		if n > 1 {
			err := os.MkdirAll(s.data, 0o755)
			if err == nil {
				err = os.WriteFile(filepath.Join(s.data, "myid"), []byte(strconv.Itoa(i+1)), 0o644)
			}
			if err != nil {
				t.Fatalf("testinfra: %v", err)
			}
		}
		s.command = func() *exec.Cmd {
			// A small heap and the client JIT alone start in about a second.
			return exec.Command(java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
				"-cp", zookeeperJar+":"+slf4jJar, "org.apache.zookeeper.server.quorum.QuorumPeerMain", configPath)
		}
		// srvr, unlike ruok, fails until the server serves requests.
		s.ready = func(ctx context.Context) error { return exchange(ctx, s.addr, "srvr", "Zookeeper version") }
		servers[i] = s
	}
	return servers
}

// port returns the port of a host:port address.
func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// srvr returns a ZooKeeper server's whole answer to srvr, which says
// whether it leads ("Mode: leader").
func srvr(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "", err
	}
	answer, err := io.ReadAll(conn) // the server closes the connection after it
	return string(answer), err
}
