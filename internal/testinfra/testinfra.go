// Package testinfra gives tests real Redis, MySQL, ZooKeeper and etcd
// servers.
//
// MySQL, Redis, ZooKeeper and etcd give each test its own slice of a shared
// server (a database, a key prefix, a znode root), removed at cleanup, so
// tests can run in parallel. The shared server is, in order:
//
//  1. the one named by SHOP_TEST_MYSQL_DSN, SHOP_TEST_REDIS_ADDR,
//     SHOP_TEST_ZK_ADDR or SHOP_TEST_ETCD_ADDR, as printed by
//     scripts/services.sh env;
//  2. a container started by testcontainers-go, once per test binary, when a
//     Docker engine answers;
//  3. none: the test fails and says how to provide one.
//
// StartRedis, StartZooKeeper and StartEtcd run a server process private to
// one test, which it may stop, kill or restart to reproduce crashes.
// StartZooKeeperEnsemble and StartEtcdCluster run three, whose leader the
// test may kill.
// StartProxy stands between one client and a server, so that a test can
// pause or cut off that client alone. StartMariaDB runs a MariaDB of the
// test's own, and StartMySQLPair a primary and its replica behind an
// endpoint, which a test may fail over or switch over.
//
// Under go test -short, MySQL and Redis give embedded backends instead,
// an SQLite file and a miniredis (see Embedded); the helpers that have no
// embedded stand-in skip their test, and so does NeedsRealServers.
package testinfra

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// shared is a server that many tests use, each in its own namespace.
type shared struct {
	name string // in messages, e.g. "MySQL"
	env  string // the variable that points at an existing server
	// container starts a container at most once and returns what env
	// would hold.
	container func() (string, error)
}

// locate returns the env value or the container's, or ends the test.
func (s *shared) locate(t testing.TB) string {
	t.Helper()
	skipShort(t, s.name)
	if v := os.Getenv(s.env); v != "" {
		return v
	}
	v, err := s.container()
	if err != nil {
		t.Fatalf(`testinfra: no %s server: %v
Provide one in any of these ways:
  - scripts/services.sh up && eval "$(scripts/services.sh env)"
  - set %s (scripts/services.sh env shows the format)
  - start a Docker engine, and the tests run %s in a container`,
			s.name, err, s.env, s.name)
	}
	return v
}

// dockerReady reports whether a Docker engine answers. It is bounded so
// that a machine without Docker fails in seconds.
var dockerReady = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	return cli.Close()
})

// onceContainer runs image once per test binary, exposing port, and returns
// the address as host:port. The container is never terminated here:
// testcontainers' reaper (Ryuk) removes it when the test binary exits.
func onceContainer(image, port string, ready wait.Strategy, opts ...testcontainers.ContainerCustomizer) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		if err := dockerReady(); err != nil {
			return "", err
		}
		// Not a test's context: the container outlives the first test.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c, err := testcontainers.Run(ctx, image, slices.Concat(opts, []testcontainers.ContainerCustomizer{
			testcontainers.WithExposedPorts(port), testcontainers.WithWaitStrategy(ready),
		})...)
		if err != nil {
			return "", fmt.Errorf("testcontainers: %w", err)
		}
		return c.PortEndpoint(ctx, port, "")
	})
}

// cleanup runs undo at the test's cleanup, bounded by a ctx of its own:
// t.Context is done by then. A failed undo fails the test with what.
func cleanup(t testing.TB, what string, undo func(ctx context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := undo(ctx); err != nil {
			t.Errorf("testinfra: %s: %v", what, err)
		}
	})
}

// randomName returns prefix followed by 16 random hex digits.
func randomName(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return fmt.Sprintf("%s%x", prefix, b)
}

// WaitFor polls cond every millisecond until it holds, and fails t if it
// does not within 30 seconds: what names the condition in the failure.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
