package testinfra

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/freeport"
)

// ServerWaiter names the goroutine that waits for a server's process
// until the test's cleanup, for a goroutine leak check to ignore.
const ServerWaiter = "github.com/stockguard/shop/internal/testinfra.(*Server).launch.func1"

// stopTimeout bounds how long Stop waits for a clean shutdown before it
// kills the server.
const stopTimeout = 30 * time.Second

// Server is a server process private to one test, on a loopback port that
// stays the same across restarts. It is killed at the test's cleanup and,
// on Linux, dies with the test binary even when cleanup does not run.
//
// Start must be called from the test's goroutine; the other methods may be
// called from any goroutine.
type Server struct {
	t       testing.TB
	name    string // the binary, for messages
	addr    string
	logPath string                          // stdout and stderr of every run
	data    string                          // the data dir, if the server keeps one
	command func() *exec.Cmd                // a fresh command for each start
	ready   func(ctx context.Context) error // nil once the server serves requests
	timeout time.Duration                   // for ready

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil when not started or stopped
	exited chan struct{} // closed when cmd has exited
}

// newServer prepares a server and kills it at cleanup. Call it after any
// t.TempDir the server uses, so that the kill runs before the removal.
func newServer(t testing.TB, name, addr, dir string, timeout time.Duration) *Server {
	s := &Server{t: t, name: name, addr: addr, logPath: filepath.Join(dir, name+".log"), timeout: timeout}
	t.Cleanup(s.Kill)
	return s
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Start starts the server, on the same port and with the same data as
// before, and waits until it answers.
func (s *Server) Start() {
	s.t.Helper()
	s.launch()
	s.awaitReady()
}

// startTries bounds how many times startNew makes servers whose port was
// taken.
const startTries = 3

// errPortTaken marks a server that did not start because a port it was
// given was taken: another process may bind it between the choice and the
// server's start.
var errPortTaken = errors.New("a port it was given is taken")

// startOne starts the server that prepare makes, as startNew does.
func startOne(t testing.TB, prepare func() *Server) *Server {
	t.Helper()
	return startNew(t, func() []*Server { return []*Server{prepare()} })[0]
}

// startNew starts the servers that prepare makes, on ports of their own,
// and waits until they answer. It launches every server before it waits
// for any: the members of an ensemble answer only once a quorum of them
// runs. When a server finds a port taken, prepare makes them all again,
// on other ports, startTries times at most.
func startNew(t testing.TB, prepare func() []*Server) []*Server {
	t.Helper()
	for try := 1; ; try++ {
		servers := prepare()
		for _, s := range servers {
			s.launch()
		}
		var err error
		for _, s := range servers {
			if err = s.started(); err != nil {
				break
			}
		}
		if err == nil {
			return servers
		}
		if try == startTries || !errors.Is(err, errPortTaken) {
			t.Fatal(err)
		}
		for _, s := range servers {
			s.Kill()
		}
		t.Logf("%v\ntestinfra: starting again on other ports, try %d of %d", err, try+1, startTries)
	}
}

// launch starts the server's process.
func (s *Server) launch() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running() {
		s.t.Fatalf("testinfra: %s on %s: Start while running", s.name, s.addr)
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatalf("testinfra: %v", err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := s.command()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("testinfra: start %s: %v", s.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status shows in ProcessState
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
}

// awaitReady waits until the launched server answers, or ends the test.
func (s *Server) awaitReady() {
	s.t.Helper()
	if err := s.started(); err != nil {
		s.t.Fatal(err)
	}
}

// started waits until the launched server answers, and says why not.
func (s *Server) started() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.t.Context(), s.timeout)
	defer cancel()
	err := s.await(ctx)
	if err == nil {
		return nil
	}
	// Each server words it its own way: Redis "bind: Address already in
	// use", etcd "bind: address already in use", ZooKeeper
	// "java.net.BindException: Address already in use", MariaDB "Got
	// error: 98: Address already in use".
	if log, _ := os.ReadFile(s.logPath); bytes.Contains(bytes.ToLower(log), []byte("address already in use")) {
		err = fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return fmt.Errorf("testinfra: %s on %s: %w\nlast lines of %s:\n%s", s.name, s.addr, err, s.logPath, tail(s.logPath))
}

// await polls ready until it succeeds, the process exits or ctx ends.
func (s *Server) await(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		// One attempt must not use up the whole wait: a server may accept
		// a connection long before it answers on it.
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.ready(attempt)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before it answered: %v", s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("not answering after %v: %w", s.timeout, err)
		case <-tick.C:
		}
	}
}

// Pid returns the process id of the server's current run, 0 when it is
// not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop asks the server to shut down (SIGTERM) and waits until it has. A
// server that does not stop within 30 seconds is killed.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.t.Errorf("testinfra: %s on %s ignored SIGTERM for %v; killing it", s.name, s.addr, stopTimeout)
		s.signal(syscall.SIGKILL)
		<-s.exited
	}
	s.cmd = nil
}

// Kill kills the server (SIGKILL), like a crash, and waits until it is gone.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// Pause stops the server (SIGSTOP), as a stalled host or a long GC would,
// and waits until its process is stopped. Its connections stay open and
// unanswered until Resume.
func (s *Server) Pause() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		s.t.Fatalf("testinfra: Pause of %s on %s while it is not running", s.name, s.addr)
	}
	s.signal(syscall.SIGSTOP)
	if err := AwaitStopped(s.cmd.Process.Pid); err != nil {
		s.t.Fatalf("testinfra: %s on %s: %v", s.name, s.addr, err)
	}
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running() {
		s.signal(syscall.SIGCONT)
	}
}

// AwaitStopped waits up to 5 seconds until /proc shows the process pid
// stopped by a signal: a SIGSTOP lands soon, not at once.
func AwaitStopped(pid int) error {
	var stat []byte
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		stat, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil && strings.Contains(string(stat), ") T ") {
			return nil
		}
	}
	return fmt.Errorf("process %d is not stopped: %q %v", pid, stat, err)
}

// Empty deletes the data of a stopped or killed server, so that the next
// Start begins as a server restored from nothing. A server that keeps no
// data (redis-server here) starts empty anyway.
func (s *Server) Empty() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running() {
		s.t.Fatalf("testinfra: Empty of %s on %s while it runs", s.name, s.addr)
	}
	if err := os.RemoveAll(s.data); err != nil {
		s.t.Fatalf("testinfra: %v", err)
	}
}

func (s *Server) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// signal signals the server's process group, which holds whatever the
// server forked.
func (s *Server) signal(sig syscall.Signal) {
	err := syscall.Kill(-s.cmd.Process.Pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		s.t.Errorf("testinfra: %v to %s: %v", sig, s.name, err)
	}
}

// freeAddr returns a loopback address whose port, and that port plus each
// of offsets, are free now (see freeport.Addr).
func freeAddr(t testing.TB, offsets ...int) string {
	t.Helper()
	addr, err := freeport.Addr(offsets...)
	if err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	return addr
}

// listen listens on a free loopback port, for a server in the test binary.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := freeport.Listen()
	if err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	return ln
}

// lookPath finds a server binary on PATH or in the Debian directories that
// a non-root PATH may lack, or ends the test naming the package to install.
func lookPath(t testing.TB, name, debianPackage string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Fatalf("testinfra: %s not found on PATH, in /usr/sbin or /usr/bin: install the Debian package %s (scripts/services.sh up does)", name, debianPackage)
	return ""
}

// exchange sends request over a fresh connection and checks that the first
// line of the answer starts with want: enough to see that Redis (PING) or
// ZooKeeper (srvr) is serving.
func exchange(ctx context.Context, addr, request, want string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte(request)); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if !strings.HasPrefix(line, want) {
		return fmt.Errorf("answered %q to %q (%v)", line, request, err)
	}
	return nil
}

// tail returns the last lines of a log, for failure messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-20):], []byte("\n")))
}
