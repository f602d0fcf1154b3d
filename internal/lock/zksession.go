package lock

import (
	"context"
	"log/slog"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/stockguard/shop/internal/background"
)

// refusedLimit is how many reconnects in a row ZooKeeper may refuse at
// their handshake before ZKConn gives up on the connection. go-zookeeper
// tries about once a second; a server that is starting may refuse one or
// two.
const refusedLimit = 5

// ZKConn is the shop's ZooKeeper connection, replaced by a new one when the
// ensemble refuses it for good. A client reconnects with the last zxid it
// has seen, and a server refuses a client that has seen more than the
// server has: after an ensemble restarted without its data, every
// reconnect of an old connection is refused at the handshake, and
// go-zookeeper would keep trying forever. A new connection has seen
// nothing, and is accepted. Its session is new too; the old one, and the
// locks it held, are gone with the ensemble's data anyway.
type ZKConn struct {
	dial func(onEvent func(zk.Event)) (*zk.Conn, error)
	log  *slog.Logger

	mu        sync.Mutex
	conn      *zk.Conn
	session   *background.Group // the work of conn's session, ended with it
	gen       int               // how many times conn was replaced
	refused   int               // handshakes refused in a row
	shaking   bool              // a handshake is under way: the TCP connection is up
	replacing bool              // a replacement is under way
	closed    bool
	replaces  sync.WaitGroup // the replacement under way
}

// NewZKConn dials the first connection with dial, which must pass the
// event callback it is given to zk.Connect, and replaces it when needed.
func NewZKConn(dial func(onEvent func(zk.Event)) (*zk.Conn, error), log *slog.Logger) (*ZKConn, error) {
	c := &ZKConn{dial: dial, log: log, session: background.New()}
	conn, err := dial(c.watch(0))
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return c, nil
}

// Conn returns the current connection and its generation, which changes
// when the connection is replaced.
func (c *ZKConn) Conn() (*zk.Conn, int) {
	conn, gen, _ := c.current()
	return conn, gen
}

func (c *ZKConn) current() (*zk.Conn, int, *background.Group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn, c.gen, c.session
}

// State is the current connection's state.
func (c *ZKConn) State() zk.State {
	conn, _ := c.Conn()
	return conn.State()
}

// Close ends the current session's background work and waits for it and
// for a replacement under way, then closes the connection; it is not
// replaced after that.
func (c *ZKConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.replaces.Wait()
	conn, _, s := c.current()
	s.End()
	conn.Close()
	return nil
}

// watch returns the event callback of the connection of generation gen.
// It counts the handshakes refused in a row: the TCP connection came up,
// and went down again before a session was established.
func (c *ZKConn) watch(gen int) func(zk.Event) {
	return func(ev zk.Event) {
		if ev.Type != zk.EventSession {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if gen != c.gen {
			return
		}
		switch ev.State {
		case zk.StateConnected:
			c.shaking = true
		case zk.StateHasSession:
			c.shaking, c.refused = false, 0
		case zk.StateDisconnected:
			if c.shaking {
				c.shaking = false
				c.refused++
				if c.refused >= refusedLimit && !c.replacing && !c.closed {
					c.replacing = true
					// Not on go-zookeeper's goroutine, which its Close waits for.
					c.replaces.Go(func() { c.replace(gen) })
				}
			}
		}
	}
}

// replace dials a new connection in place of the one of generation gen,
// without holding the mutex, which the connections' events take; and ends
// the old session's work before it closes the old connection.
func (c *ZKConn) replace(gen int) {
	conn, err := c.dial(c.watch(gen + 1))
	c.mu.Lock()
	c.replacing = false
	if err != nil {
		c.refused = 0 // try again after as many refusals
		c.mu.Unlock()
		c.log.Error("zookeeper: refused the session at every reconnect, and a new connection failed", "err", err)
		return
	}
	if c.closed {
		c.mu.Unlock()
		conn.Close()
		return
	}
	old, ended := c.conn, c.session
	c.conn, c.session, c.gen, c.refused, c.shaking = conn, background.New(), gen+1, 0, false
	c.mu.Unlock()
	ended.End()
	old.Close()
	c.log.Warn("zookeeper: refused the session at every reconnect, as an ensemble restarted without its data does; connected anew")
}

// ZooKeeperOn is ZooKeeper on a ZKConn's current connection: it makes a
// new ZooKeeper whenever the connection was replaced.
type ZooKeeperOn struct {
	conn *ZKConn
	opts *ZooKeeperOptions

	mu     sync.Mutex
	gen    int
	locker *ZooKeeper
}

var _ Locker = (*ZooKeeperOn)(nil)

// NewZooKeeperOn returns a Locker on conn's current connection; a bad
// root fails here.
func NewZooKeeperOn(conn *ZKConn, opts *ZooKeeperOptions) (*ZooKeeperOn, error) {
	z := &ZooKeeperOn{conn: conn, opts: opts}
	_, err := z.current()
	return z, err
}

// Acquire implements Locker.
func (z *ZooKeeperOn) Acquire(ctx context.Context, name string) (*Lease, error) {
	l, err := z.current()
	if err != nil {
		return nil, err
	}
	return l.Acquire(ctx, name)
}

// TryAcquire implements Locker.
func (z *ZooKeeperOn) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	l, err := z.current()
	if err != nil {
		return nil, err
	}
	return l.TryAcquire(ctx, name)
}

func (z *ZooKeeperOn) current() (*ZooKeeper, error) {
	conn, gen, s := z.conn.current()
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.locker == nil || z.gen != gen {
		l, err := newZooKeeper(conn, z.opts, s)
		if err != nil {
			return nil, err
		}
		z.locker, z.gen = l, gen
	}
	return z.locker, nil
}
