package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/stockguard/shop/internal/background"
)

// ZooKeeperOptions configures ZooKeeper. A nil *ZooKeeperOptions is valid.
type ZooKeeperOptions struct {
	// Root is the znode under which each lock name gets a node. Default
	// "/stockguard/locks".
	Root string
}

// ZooKeeper locks with the recipe of seeds 000 and 003 and of Curator's
// InterProcessMutex: each contender creates an ephemeral sequential znode
// under Root/<name>, and holds the lock while its node has the lowest
// sequence number. A waiter watches only the node just before its own (no
// herd). Waiting ends with the ctx, and a contender that stops waiting
// deletes its node.
//
// The lease lasts as long as the ZooKeeper session; when the session
// expires, Lost is closed. The fencing token is the node's czxid plus the
// lock's offset, kept in the node Root/<name>#offset, which Lease.Raise
// lifts past a fence after the ensemble lost its data. See
// docs/locks.md#zookeeper.
type ZooKeeper struct {
	locker
	conn    *zk.Conn
	root    string
	session *background.Group // the releases it sends again in the background
}

var _ Locker = (*ZooKeeper)(nil)

var zkACL = zk.WorldACL(zk.PermAll)

// NewZooKeeper returns a Locker on an open ZooKeeper connection. The
// connection's session timeout is the lease: how long the lock outlives a
// holder that stops answering. Close it before the connection.
func NewZooKeeper(conn *zk.Conn, opts *ZooKeeperOptions) (*ZooKeeper, error) {
	return newZooKeeper(conn, opts, background.New())
}

// Close stops sending again the releases that a lost connection cut short,
// and waits for them: after it, the connection may be closed.
func (z *ZooKeeper) Close() { z.session.End() }

func newZooKeeper(conn *zk.Conn, opts *ZooKeeperOptions, s *background.Group) (*ZooKeeper, error) {
	root := "/stockguard/locks"
	if opts != nil && opts.Root != "" {
		root = opts.Root
	}
	if !strings.HasPrefix(root, "/") || strings.HasSuffix(root, "/") || path.Clean(root) != root {
		return nil, fmt.Errorf("lock: zookeeper root %q is not a clean absolute path", root)
	}
	z := &ZooKeeper{conn: conn, root: root, session: s}
	z.locker = remote("zookeeper", z)
	return z, nil
}

// lockPrefix names the contenders' nodes: <dir>/_c_<guid>-lock-<sequence>.
const lockPrefix = "lock-"

func (z *ZooKeeper) grant(ctx context.Context, name string, wait bool) (grant, error) {
	dir := z.root + "/" + url.PathEscape(name)
	node, err := z.create(dir)
	if err != nil {
		return grant{}, err
	}
	// PathEscape leaves no "#" in a name: no lock's dir is this node.
	g, err := z.await(ctx, dir, node, dir+"#offset", wait)
	if err != nil {
		_ = z.remove(node) // leave nothing behind
		return grant{}, err
	}
	return g, nil
}

// create adds this contender's node to the queue of dir, creating the
// parent nodes if needed. The protected create finds its node again if the
// connection drops before the reply.
func (z *ZooKeeper) create(dir string) (string, error) {
	for attempt := 0; ; attempt++ {
		node, err := z.conn.CreateProtectedEphemeralSequential(dir+"/"+lockPrefix, nil, zkACL)
		if !errors.Is(err, zk.ErrNoNode) || attempt == 2 {
			return node, err
		}
		if err := z.makeDirs(dir); err != nil {
			return "", err
		}
	}
}

// makeDirs creates the root and, as a container node that the server
// removes once it is empty, the lock's own dir.
func (z *ZooKeeper) makeDirs(dir string) error {
	if err := MkdirAll(z.conn, path.Dir(dir)); err != nil {
		return err
	}
	if _, err := z.conn.CreateContainer(dir, nil, zk.FlagContainer, zkACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zookeeper: create %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates the persistent znode p and each parent it lacks, as
// mkdir -p does; nodes that exist already are left as they are.
func MkdirAll(conn *zk.Conn, p string) error {
	node := ""
	for _, part := range strings.Split(p, "/")[1:] {
		if part == "" {
			continue
		}
		node += "/" + part
		if _, err := conn.Create(node, nil, zk.FlagPersistent, zkACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: create %s: %w", node, err)
		}
	}
	return nil
}

// await waits until node is the first in dir's queue.
func (z *ZooKeeper) await(ctx context.Context, dir, node, offset string, wait bool) (grant, error) {
	for {
		children, _, err := z.conn.Children(dir)
		if err != nil {
			return grant{}, err
		}
		prev, err := predecessor(children, path.Base(node))
		if err != nil {
			return grant{}, err
		}
		if prev == "" {
			return z.hold(node, offset)
		}
		if !wait {
			return grant{}, ErrLocked
		}
		// A data watch, as Curator sets: unlike an exists watch, it is not
		// left behind when the node is already gone.
		_, _, deleted, err := z.conn.GetW(dir + "/" + prev)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return grant{}, err
		}
		select {
		case ev := <-deleted:
			if ev.Err != nil {
				return grant{}, ev.Err // the session expired or the connection closed
			}
		case <-ctx.Done():
			return grant{}, context.Cause(ctx)
		}
	}
}

// hold makes the grant of the node that is first in its queue. A watch on
// the node itself tells when it is gone: deleted with its session, or by
// hand. The token is the node's czxid plus the lock's offset, read once
// the node is first: every raise of the offset came from an earlier holder,
// before it let the lock go, and this session reads after it saw that.
func (z *ZooKeeper) hold(node, offset string) (grant, error) {
	_, stat, changed, err := z.conn.GetW(node)
	if err != nil {
		return grant{}, err
	}
	var base int64
	data, _, err := z.conn.Get(offset)
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		return grant{}, err
	default:
		if base, err = strconv.ParseInt(string(data), 10, 64); err != nil {
			return grant{}, fmt.Errorf("zookeeper: token offset %s: %w", offset, err)
		}
	}
	// The node is ephemeral: once its session has expired, the server has
	// deleted it, and a release need not reach the server to know it.
	var expired atomic.Bool
	return grant{
		token: stat.Czxid + base,
		raise: func(_ context.Context, token int64) error {
			return z.raise(node, offset, token-stat.Czxid)
		},
		release: func(context.Context) error {
			if expired.Load() {
				return ErrNotHeld
			}
			err := z.remove(node)
			if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrSessionExpired) {
				return ErrNotHeld
			}
			return err
		},
		renew: func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case ev := <-changed:
					if ev.Err != nil {
						expired.Store(errors.Is(ev.Err, zk.ErrSessionExpired))
						return fmt.Errorf("zookeeper session: %w", ev.Err)
					}
					if ev.Type == zk.EventNodeDeleted {
						return errors.New("zookeeper: lock node deleted")
					}
				}
				var err error
				if _, _, changed, err = z.conn.GetW(node); err != nil {
					return fmt.Errorf("zookeeper: lock node: %w", err)
				}
			}
		},
	}, nil
}

// remove deletes a contender's node. A delete that a lost connection cut
// short is sent again, in the background, until it lands, or the session
// ends (the connection is closed or replaced) and the server deletes the
// node itself: the client reconnects to the same session if it can, and a
// node left in a live session would hold the lock for as long as the
// process lives, every later contender waiting behind it. A shop paused
// for less than its session timeout, by SIGSTOP or a long GC, comes back
// to just that.
func (z *ZooKeeper) remove(node string) error {
	err := z.conn.Delete(node, -1)
	if !connectionLost(err) {
		return err
	}
	z.session.Go(func(ctx context.Context) {
		t := time.NewTimer(10 * time.Millisecond)
		defer t.Stop()
		for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !connectionLost(z.conn.Delete(node, -1)) {
				return
			}
			t.Reset(wait)
		}
	})
	return nil
}

// connectionLost reports whether a request failed because the client had
// no connection, which it makes again, with its session if that lives.
func connectionLost(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer)
}

// raise sets the lock's offset to base in one transaction with a check
// that node, the holder's, still exists: a holder whose session has
// expired cannot raise.
func (z *ZooKeeper) raise(node, offset string, base int64) error {
	if _, err := z.conn.Create(offset, []byte("0"), zk.FlagPersistent, zkACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zookeeper: create %s: %w", offset, err)
	}
	res, err := z.conn.Multi(
		&zk.CheckVersionRequest{Path: node, Version: -1},
		&zk.SetDataRequest{Path: offset, Data: []byte(strconv.FormatInt(base, 10)), Version: -1})
	for _, op := range res {
		err = cmp.Or(err, op.Error) // the check's, if it failed
	}
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrSessionExpired) {
		return ErrNotHeld
	}
	return err
}

// predecessor returns the node just before me in the queue, by sequence
// number, or "" if me is first.
func predecessor(children []string, me string) (string, error) {
	seq := func(name string) int64 {
		_, digits, ok := strings.Cut(name, lockPrefix)
		n, err := strconv.ParseInt(digits, 10, 64)
		if !ok || err != nil {
			return -1 // not a contender's node
		}
		return n
	}
	children = slices.DeleteFunc(children, func(c string) bool { return seq(c) < 0 })
	slices.SortFunc(children, func(a, b string) int { return cmp.Compare(seq(a), seq(b)) })
	i := slices.Index(children, me)
	switch {
	case i < 0:
		return "", fmt.Errorf("zookeeper: own node %s is gone: %w", me, zk.ErrNoNode)
	case i == 0:
		return "", nil
	}
	return children[i-1], nil
}
