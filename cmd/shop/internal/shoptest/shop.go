package shoptest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/sale"
)

// Start runs `shop serve` in a child process on a random port and
// returns its base URL once it is ready.
func Start(t *testing.T, env ...string) (string, *exec.Cmd) {
	t.Helper()
	addrs, cmd := Serve(t, "--debug=", env)
	return "http://" + addrs[0], cmd
}

// Serve runs `shop serve` with debug as its --debug flag, and returns the
// addresses it listens on, public first, once it listens on all of them.
func Serve(t *testing.T, debug string, env []string) ([]string, *exec.Cmd) {
	t.Helper()
	cmd, addr := Spawn(t, debug, env)
	return Listening(t, addr, addrCount(debug)), cmd
}

// addrCount is how many addresses `shop serve` with debug as its --debug
// flag listens on: the public one, and the debug one unless it is off.
func addrCount(debug string) int {
	if debug == "--debug=" {
		return 1
	}
	return 2
}

// Spawn starts `shop serve` and returns at once, with the channel of
// the addresses it will listen on. Everything the child prints lands in
// the test's log before the test ends. A child that has not listened on
// all its addresses when a failed test ends overran Listening's time: it
// gets SIGQUIT before it is killed, and its goroutine dump shows where its
// start was stuck.
func Spawn(t *testing.T, debug string, env []string) (*exec.Cmd, <-chan string) {
	t.Helper()
	bin := Bin(t)
	ctx, quit := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", debug)
	DumpOnCancel(cmd)
	cmd.Env = append(os.Environ(), "SHOP_HTTP_ADDR=127.0.0.1:0")
	cmd.Env = append(cmd.Env, env...)
	addr := make(chan string, 2)
	stderr := &childLog{t: t, addr: addr}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		quit()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && int(stderr.listened.Load()) < addrCount(debug) {
			quit()
		} else {
			cmd.Process.Kill()
		}
		cmd.Wait() // until all the child wrote is logged
		quit()
	})
	return cmd, addr
}

// quitWait is how long a child has to write its goroutine dump after
// SIGQUIT before it is killed: a dump takes well under a second, and the
// rest is a busy machine's margin.
const quitWait = 10 * time.Second

// DumpOnCancel makes cmd, made by exec.CommandContext, get SIGQUIT rather
// than SIGKILL when its context ends: the Go runtime then writes every
// goroutine's stack to stderr, which the test shows, and exits. A child
// still running quitWait later is killed.
func DumpOnCancel(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = quitWait
}

// childLog is a child's stderr: each line goes to the test's log, and each
// address the child listens on to addr. exec.Cmd.Wait returns once the
// child's last line is written here.
type childLog struct {
	t        *testing.T
	addr     chan<- string
	listened atomic.Int32
	partial  []byte
}

func (l *childLog) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	for {
		line, rest, ok := bytes.Cut(l.partial, []byte("\n"))
		if !ok {
			return len(p), nil
		}
		if a, ok := sale.ListenAddr(line); ok {
			l.listened.Add(1)
			l.addr <- a
		}
		l.t.Log(string(line))
		l.partial = rest
	}
}

// Listening waits for want addresses on addr, at most 30 s.
func Listening(t *testing.T, addr <-chan string, want int) []string {
	t.Helper()
	var addrs []string
	timeout := time.After(30 * time.Second)
	for len(addrs) < want {
		select {
		case a := <-addr:
			addrs = append(addrs, a)
		case <-timeout:
			t.Fatalf("shop listened on %v within 30s, want %d addresses", addrs, want)
		}
	}
	return addrs
}

// ShutdownTimeout is how long `shop serve` gives the requests under way
// after SIGTERM: shutdownTimeout in package main, whose tests check that
// the two agree.
const ShutdownTimeout = 15 * time.Second

// Stop stops a shop that Spawn started with SIGTERM and expects a
// clean exit. The shop may take ShutdownTimeout for the requests under
// way and as long again to send its last spans; stopWait adds a busy
// machine's margin to that. A shop that overran it gets SIGQUIT, and its
// goroutine dump shows where its shutdown was stuck.
func Stop(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	const stopWait = 2*ShutdownTimeout + 30*time.Second
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("shop exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(stopWait):
		cmd.Cancel() // SIGQUIT
		select {
		case <-done:
		case <-time.After(quitWait):
			cmd.Process.Kill()
			<-done
		}
		t.Fatalf("shop did not exit within %v of SIGTERM", stopWait)
	}
}
