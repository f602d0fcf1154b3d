package testinfra

import (
	"context"
	"testing"
	"time"
)

// Ensemble is a ZooKeeper ensemble or an etcd cluster of three servers,
// private to one test, whose leader the test may kill: the two others
// elect a new one. StartZooKeeperEnsemble and StartEtcdCluster start one.
// A member keeps its data across a kill; Empty of a member is not for an
// ensemble, whose members find their identity in their data dir.
type Ensemble struct {
	t       testing.TB
	name    string // for messages
	servers []*Server
	// leads reports whether the running server s is the leader now.
	leads func(ctx context.Context, s *Server) (bool, error)
}

// Addrs returns the client address of every member.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.servers))
	for i, s := range e.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Leader returns the member that leads, waiting up to 30 seconds for one.
func (e *Ensemble) Leader() *Server {
	e.t.Helper()
	var leader *Server
	WaitFor(e.t, e.name+" to have a leader", func() bool {
		leader = e.leader(nil)
		return leader != nil
	})
	return leader
}

// leader returns the running member other than old that says it leads, if
// any.
func (e *Ensemble) leader(old *Server) *Server {
	ctx, cancel := context.WithTimeout(e.t.Context(), time.Second)
	defer cancel()
	for _, s := range e.servers {
		if s == old || s.Pid() == 0 {
			continue
		}
		if ok, err := e.leads(ctx, s); err == nil && ok {
			return s
		}
	}
	return nil
}

// KillLeader kills the leader (SIGKILL), as a crash, and returns it with
// how long the others took to elect a new leader, as the test saw it. The
// killed member stays down until Restore.
func (e *Ensemble) KillLeader() (killed *Server, election time.Duration) {
	e.t.Helper()
	killed = e.Leader()
	killed.Kill()
	start := time.Now()
	WaitFor(e.t, e.name+" to elect a new leader", func() bool { return e.leader(killed) != nil })
	return killed, time.Since(start)
}

// Restore starts every member that is down, and waits until it serves.
func (e *Ensemble) Restore() {
	e.t.Helper()
	for _, s := range e.servers {
		if s.Pid() == 0 {
			s.Start()
		}
	}
	e.Leader()
}
