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
	skipShort(t, "a ZooKeeper server process of the test's own")
	java := lookPath(t, "java", "default-jre-headless")
	for _, jar := range []string{zookeeperJar, slf4jJar} {
		if _, err := os.Stat(jar); err != nil {
			t.Fatalf("testinfra: %v: install the Debian package libzookeeper-java (scripts/services.sh up does)", err)
		}
	}
	dir := t.TempDir()
	s := newServer(t, "zookeeper", freeAddr(t), dir, 60*time.Second)
	s.data = filepath.Join(dir, "data")
	_, port, _ := net.SplitHostPort(s.addr)
	// The AdminServer is off: it would listen on 8080 in every instance.
	config := fmt.Sprintf(`tickTime=500
minSessionTimeout=1000
maxSessionTimeout=60000
dataDir=%s
clientPort=%s
clientPortAddress=127.0.0.1
admin.enableServer=false
`, s.data, port)
	configPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	s.command = func() *exec.Cmd {
		// A small heap and the client JIT alone start in about a second.
		return exec.Command(java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
			"-cp", zookeeperJar+":"+slf4jJar, "org.apache.zookeeper.server.quorum.QuorumPeerMain", configPath)
	}
	// srvr, unlike ruok, fails until the server serves requests.
	s.ready = func(ctx context.Context) error { return exchange(ctx, s.addr, "srvr", "Zookeeper version") }
	s.Start()
	return s
}
