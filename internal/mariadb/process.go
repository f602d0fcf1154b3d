package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Process is a running server.
type Process struct {
	exited chan struct{}
	kill   func() error
}

// Start runs the node's server and waits until Admin can log in, at most
// until ctx ends; the server's output goes to mariadbd.log in its dir.
func (n Node) Start(ctx context.Context) (*Process, error) {
	cmd, err := n.Command()
	if err != nil {
		return nil, err
	}
	log, err := os.OpenFile(filepath.Join(n.Dir, "mariadbd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{exited: make(chan struct{}), kill: cmd.Process.Kill}
	go func() {
		_ = cmd.Wait() // the caller learns of the exit from Ready or Kill
		close(p.exited)
	}()
	if err := n.ready(ctx, p.exited); err != nil {
		p.Kill()
		return nil, fmt.Errorf("mariadb on %s: %w (see %s)", n.Addr, err, log.Name())
	}
	return p, nil
}

// ready polls the node until Admin logs in, the process exits or ctx ends.
func (n Node) ready(ctx context.Context, exited <-chan struct{}) error {
	db, err := sql.Open("mysql", n.DSN(Admin, ""))
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.PingContext(attempt)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before it answered")
		case <-ctx.Done():
			return fmt.Errorf("not answering: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill kills the server (SIGKILL), as a crash, and waits until it is gone.
func (p *Process) Kill() {
	p.kill() // an error means it has exited already
	<-p.exited
}
