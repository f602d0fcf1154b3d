package lesson

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/stockguard/shop/internal/lock"
)

// herdWaiters is how many clients queue for the lock in zk-herd.
const herdWaiters = 8

func init() {
	register(Lesson{Number: 8, Name: "zk-herd", Seed: "seed 003",
		Claim:    "sequential ephemeral nodes avoid the herd effect; the simple way, where every waiter watches the lock's children, wakes them all (羊群效应)",
		Setup:    fmt.Sprintf("%d clients queue for one lock with sequential ephemeral nodes; each holds it and releases at once; ZooKeeper's watch events are counted", herdWaiters),
		Takeaway: "let each waiter watch only the node just before its own, as lock.ZooKeeper and Curator do: one wake-up per release",
		Needs:    []Need{{ZooKeeper, "no embedded server behaves like ZooKeeper's sessions and watches"}},
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return herd(ctx, env, "herd", "every waiter watches the lock's children", func(conn *zk.Conn, dir, _ string) ([]string, <-chan zk.Event, error) {
				queue, _, ch, err := conn.ChildrenW(dir)
				return queue, ch, err
			})
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			return herd(ctx, env, "predecessor", "each waiter watches its predecessor", func(conn *zk.Conn, dir, node string) ([]string, <-chan zk.Event, error) {
				queue, _, err := conn.Children(dir)
				if err != nil {
					return nil, nil, err
				}
				slices.Sort(queue)
				at := slices.Index(queue, path.Base(node))
				if at <= 0 {
					return queue, nil, nil
				}
				ok, _, ch, err := conn.ExistsW(path.Join(dir, queue[at-1]))
				if err == nil && !ok {
					return queue, nil, nil // gone already: look again
				}
				return queue, ch, err
			})
		},
	})
}

// watchFunc lists the queue in dir and sets the watch of the waiter of
// node: a nil channel means look again at once.
type watchFunc func(conn *zk.Conn, dir, node string) (queue []string, ch <-chan zk.Event, err error)

// herd queues herdWaiters nodes in a fresh znode, then lets each waiter
// hold the lock and release it as soon as it is first, and counts the watch
// events ZooKeeper delivered: the wake-ups.
func herd(ctx context.Context, env *Env, tag, name string, watch watchFunc) (Trial, error) {
	conn, _, err := zk.Connect(env.ZooKeeper, 10*time.Second, zk.WithLogger(silent{}))
	if err != nil {
		return Trial{}, err
	}
	defer conn.Close()
	dir := path.Join(env.ZooKeeperRoot, strings.ReplaceAll(env.Prefix, ":", "-")+"zk-herd-"+tag)
	if err := lock.MkdirAll(conn, dir); err != nil {
		return Trial{}, err
	}
	defer conn.Delete(dir, -1)
	nodes := make([]string, herdWaiters)
	for i := range nodes {
		// Every node first, then the waiting: the queue is whole before
		// anyone is woken.
		if nodes[i], err = conn.Create(dir+"/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
			return Trial{}, err
		}
	}
	var wakeups, releases atomic.Int64
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, node := range nodes {
		wg.Go(func() {
			for ctx.Err() == nil {
				queue, ch, err := watch(conn, dir, node)
				if err != nil {
					errs[i] = err
					return
				}
				slices.Sort(queue)
				if slices.Index(queue, path.Base(node)) == 0 { // it holds the lock, and releases it
					releases.Add(1)
					errs[i] = conn.Delete(node, -1)
					return
				}
				if ch == nil {
					continue
				}
				select {
				case <-ch:
					wakeups.Add(1)
				case <-ctx.Done():
				}
			}
			errs[i] = errors.Join(errs[i], ctx.Err())
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Trial{}, err
	}
	// The first holder released without waiting; each release after it
	// should wake its successor alone.
	waited := releases.Load() - 1
	per := float64(wakeups.Load()) / float64(waited)
	return Trial{Name: name,
		Numbers: map[string]int64{"releases": releases.Load(), "wakeups": wakeups.Load(), "wakeups_per_release_x100": int64(per * 100)},
		Happened: fmt.Sprintf("%d releases woke waiters %d times: %.1f wake-ups for each of the %d releases with a waiter behind (the last had none)",
			releases.Load(), wakeups.Load(), per, waited),
		Failed: wakeups.Load() > waited}, nil
}

// silent drops the ZooKeeper client's log lines.
type silent struct{}

func (silent) Printf(string, ...any) {}

var _ zk.Logger = silent{}
