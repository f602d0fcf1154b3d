package testinfra

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestMain lets the test binary stand in for redis-server, for
// TestRedisClusterBusPortTaken.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "redis-server" {
		os.Exit(standInForRedis())
	}
	os.Exit(m.Run())
}

// TestRedisClusterBusPortTaken: a cluster starts though the bus port of
// its first node is taken between the node's choice of ports and its
// start, as an outgoing connection may take it: the node is started again
// on other ports, and the test's log says so.
func TestRedisClusterBusPortTaken(t *testing.T) {
	skipShort(t, "a Redis Cluster of the test's own")
	dir := t.TempDir()
	self, err := os.Executable()
	if err == nil {
		err = os.Symlink(self, filepath.Join(dir, "redis-server"))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TESTINFRA_REDIS_SERVER", lookPath(t, "redis-server", "redis-server"))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	taken := filepath.Join(dir, "taken")
	t.Setenv("TESTINFRA_TAKE_BUS", taken)

	StartRedisCluster(t)
	if _, err := os.Stat(taken); err != nil {
		t.Errorf("no node's bus port was taken, so the start showed nothing: %v", err)
	}
}

// standInForRedis runs the real redis-server with the arguments it was
// given, and waits for it. The first time, it holds the node's bus port
// meanwhile.
func standInForRedis() int {
	args := os.Args[1:]
	if f, err := os.OpenFile(os.Getenv("TESTINFRA_TAKE_BUS"), os.O_CREATE|os.O_EXCL, 0o644); err == nil {
		f.Close()
		port, err := strconv.Atoi(args[slices.Index(args, "--port")+1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "stand-in for redis-server:", err)
			return 1
		}
		bus := port + 10000 // Redis Cluster's rule
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(bus)))
		if err != nil {
			fmt.Fprintln(os.Stderr, "stand-in for redis-server:", err)
			return 1
		}
		defer ln.Close()
	}
	cmd := exec.Command(os.Getenv("TESTINFRA_REDIS_SERVER"), args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	var exit *exec.ExitError
	if err := cmd.Run(); errors.As(err, &exit) {
		return exit.ExitCode()
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "stand-in for redis-server:", err)
		return 1
	}
	return 0
}
