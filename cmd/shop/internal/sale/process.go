package sale

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/stockguard/shop/loadtest"
)

// processes returns a Launcher that runs each instance as a child process,
// `bin serve`, with env added to this process's environment. Each child
// listens on a loopback port of its own choosing, which it logs.
func processes(bin string, env []string) Launcher {
	return children(bin, env, func(strategy, token string) []string {
		return []string{"serve", "--http", "127.0.0.1:0", "--debug=", "--strategy", strategy, "--admin-token", token}
	})
}

// echoes returns a Launcher of `bin echo` children: the shop's HTTP stack
// with no backends, for the http-echo ceiling.
func echoes(bin string) Launcher {
	return children(bin, nil, func(string, string) []string { return []string{"echo", "--http", "127.0.0.1:0"} })
}

// children returns a Launcher of child processes of bin, run with args.
func children(bin string, env []string, args func(strategy, token string) []string) Launcher {
	return func(ctx context.Context, strategy string, instances int) (Fleet, error) {
		token := rand.Text()
		f := Fleet{Shop: loadtest.Shop{AdminToken: token}}
		var children []*child
		f.Stop = func() ([]loadtest.Usage, error) {
			usage := make([]loadtest.Usage, len(children))
			var errs []error
			for i, c := range children {
				usage[i], errs = c.stop(), append(errs, c.err())
			}
			return usage, errors.Join(errs...)
		}
		for range instances {
			c, err := startChild(ctx, bin, env, args(strategy, token)...)
			if err == nil {
				children = append(children, c)
				err = loadtest.WaitReady(ctx, c.url)
			}
			if err != nil {
				_, stopErr := f.Stop()
				return Fleet{}, errors.Join(err, stopErr)
			}
			f.URLs = append(f.URLs, c.url)
			f.PIDs = append(f.PIDs, c.cmd.Process.Pid)
		}
		return f, nil
	}
}

// child is one running shop process.
type child struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{} // closed once cmd has been waited for
	tail   []string      // its last log lines, for errors
}

// startChild starts bin and waits until it logs the address it listens on.
func startChild(ctx context.Context, bin string, env []string, args ...string) (*child, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sale: start %s: %w", bin, err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		c.readLog(stderr, addr)
	}()
	go func() {
		<-logged // Wait closes the pipe: read it all first
		cmd.Wait()
		close(c.exited)
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case a := <-addr:
		c.url = "http://" + a
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("sale: %s exited: %w", bin, c.err())
	case <-timer.C:
		err = errors.New("did not log its address in 30s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.stop()
	return nil, fmt.Errorf("sale: %s: %w", bin, err)
}

// readLog scans the child's JSON log for the first "listening" line and
// keeps the last lines.
func (c *child) readLog(r io.Reader, addr chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if a, ok := ListenAddr(sc.Bytes()); ok && addr != nil {
			addr <- a
			addr = nil
		}
		if c.tail = append(c.tail, line); len(c.tail) > 10 {
			c.tail = c.tail[1:]
		}
	}
}

// ListenAddr returns the address in a `shop serve` JSON log line that says
// it is listening, the first of which is the public API's.
func ListenAddr(line []byte) (addr string, ok bool) {
	var entry struct{ Msg, Addr string }
	if json.Unmarshal(line, &entry) != nil || entry.Msg != "listening" {
		return "", false
	}
	return entry.Addr, true
}

// stop ends the child gracefully, or kills it after a grace period, and
// returns what it used.
func (c *child) stop() loadtest.Usage {
	var rss int64
	select {
	case <-c.exited:
	default:
		rss = peakRSS(c.cmd.Process.Pid)
		if c.cmd.Process.Signal(syscall.SIGTERM) != nil {
			c.cmd.Process.Kill()
		}
		select {
		case <-c.exited:
		case <-time.After(20 * time.Second):
			c.cmd.Process.Kill()
			<-c.exited
		}
	}
	ps := c.cmd.ProcessState
	return loadtest.Usage{PeakRSSBytes: rss, CPUSeconds: (ps.UserTime() + ps.SystemTime()).Seconds()}
}

// err explains a failed exit; the shop exits 0 on SIGTERM. Call it only
// after the child exited.
func (c *child) err() error {
	if c.cmd.ProcessState.Success() {
		return nil
	}
	return fmt.Errorf("shop instance %s: %s", c.cmd.ProcessState, strings.Join(c.tail, "\n"))
}
