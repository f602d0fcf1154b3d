package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
)

// Pair is a primary (0) and its replica (1), each a server of its own.
type Pair struct {
	Nodes [2]Node
	Procs [2]*Process
	// Admin are connection pools of Admin that keep no idle connection,
	// so that none outlives a server killed.
	Admin [2]*sql.DB
}

// StartPair installs a primary and a replica in dir, side by side,
// starts them, and has the replica replicate asynchronously (see
// SemiSync) from the start. Close kills them, even when StartPair fails.
func StartPair(ctx context.Context, dir string) (*Pair, error) {
	p := &Pair{}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range p.Nodes {
		n, err := NewNode(filepath.Join(dir, fmt.Sprint(i)), i+1)
		if err != nil {
			return p, err
		}
		p.Nodes[i] = n
		wg.Go(func() { errs[i] = n.Install(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return p, err
	}
	for i, n := range p.Nodes {
		proc, err := n.Start(ctx)
		if err != nil {
			return p, err
		}
		p.Procs[i] = proc
		if p.Admin[i], err = sql.Open("mysql", n.DSN(Admin, "")); err != nil {
			return p, err
		}
		p.Admin[i].SetMaxIdleConns(0)
	}
	return p, Replicate(ctx, p.Admin[1], p.Nodes[0].Addr)
}

// Close closes the pools and kills the servers.
func (p *Pair) Close() {
	for i := range p.Nodes {
		if p.Admin[i] != nil {
			p.Admin[i].Close()
		}
		if p.Procs[i] != nil {
			p.Procs[i].Kill()
		}
	}
}
