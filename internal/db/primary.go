package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// ErrReadOnly means the MySQL server takes no writes now: read_only is on,
// as on a replica, or on an old primary during a switchover. Nothing was
// written, and the same request may be tried again: the endpoint may
// reach the new primary by then. IsReadOnly also knows the server's own
// errors that mean it.
var ErrReadOnly = errors.New("db: the database server takes no writes now (read-only)")

// checkEvery is how long a pooled MySQL connection serves before it asks
// its server again whether it still takes writes: at most one round trip
// a second per connection.
const checkEvery = time.Second

// primaryOnly wraps the MySQL driver's connector, so that the pool keeps
// connections to the primary only. After a switchover or a failover, the
// endpoint sends new connections to the new primary, but those open stay
// on the old one, which refuses writes and serves old rows. A connection
// whose server refuses a write, or answers that it is read-only when
// asked (at most once a second, as it is taken from the pool), leaves the
// pool; so does every connection opened before it, which may reach the
// same server. So does every connection opened before a new one that
// reaches another server (@@server_id) than they do: the endpoint has
// moved. Each is closed as it is next taken from the pool or returned to
// it, and never serves another statement.
// See docs/operations.md#a-read-only-database.
//
// A statement whose caller gives up is ended on the server (kill.go); a
// connection whose caller gives up while it opens serves the next one
// (spare.go).
type primaryOnly struct {
	driver.Connector
	killer *killer
	spares spares
	gen    atomic.Uint64 // the connections opened before the pool last left a server have an older one

	mu     sync.Mutex
	server uint64 // the @@server_id of the last connection opened
	known  bool   // whether one was
}

func newPrimaryOnly(c driver.Connector) *primaryOnly {
	return &primaryOnly{Connector: c, killer: newKiller(c), spares: newSpares()}
}

// Close is called as the pool closes.
func (p *primaryOnly) Close() error {
	p.spares.close()
	return p.killer.Close()
}

// mysqlConn is what database/sql uses of the driver's connection.
type mysqlConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// mysqlStmt is what database/sql uses of the driver's statement.
type mysqlStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
	driver.NamedValueChecker
}

// dial opens a connection of the pool, under ctx.
func (p *primaryOnly) dial(ctx context.Context) (*conn, error) {
	dc, err := p.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	mc, ok := dc.(mysqlConn)
	if !ok {
		dc.Close()
		return nil, fmt.Errorf("db: the MySQL driver's connection %T lacks a method the pool needs", dc)
	}
	c := &conn{mysqlConn: mc, p: p, checked: time.Now()}
	ids, err := c.numbers(ctx, "SELECT CONNECTION_ID(), @@server_id")
	if err != nil {
		mc.Close()
		return nil, err
	}
	c.id, c.server = ids[0], ids[1]
	c.gen = p.join(c.server)
	c.live, c.abort = context.WithCancel(context.Background())
	c.back, c.done = make(chan struct{}, 1), make(chan struct{}, 1)
	return c, nil
}

// join notes a new connection to server, and returns its generation. A
// server other than the last connection's means that the endpoint moved:
// the connections opened before may reach the old primary, and leave the
// pool.
func (p *primaryOnly) join(server uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known && p.server != server {
		p.retire(p.gen.Load())
	}
	p.server, p.known = server, true
	return p.gen.Load()
}

// retire takes the connections of generation gen, and every older one,
// out of the pool.
func (p *primaryOnly) retire(gen uint64) {
	p.gen.CompareAndSwap(gen, gen+1) // once per move: a stale connection does not drop newer ones
}

// conn is one connection of a primaryOnly pool. database/sql uses it from
// one goroutine at a time.
type conn struct {
	mysqlConn
	p       *primaryOnly
	gen     uint64
	id      uint64    // CONNECTION_ID() on its server
	server  uint64    // its server's @@server_id
	checked time.Time // when its server last said it takes writes, or when it was opened
	refused atomic.Bool
	tx      driver.Tx // the transaction under way, if any

	// What ends a statement whose caller gave up (kill.go). live is the
	// connection's own lifetime, not a caller's: the driver is given it
	// for the statements it watches, and closes the connection once abort
	// ends it.
	live       context.Context
	abort      context.CancelFunc
	back, done chan struct{}
}

// saw notes err: a read-only refusal takes the connection, and every one
// opened before it, out of the pool.
func (c *conn) saw(err error) {
	if err != nil && IsReadOnly(err) {
		c.refused.Store(true)
		c.p.retire(c.gen)
	}
}

// IsValid is asked as the connection returns to the pool. One whose cut
// statement did not end in time (kill.go) is not.
func (c *conn) IsValid() bool {
	return !c.refused.Load() && c.gen == c.p.gen.Load() && c.live.Err() == nil && c.mysqlConn.IsValid()
}

// ResetSession is called as the connection is taken from the pool again.
func (c *conn) ResetSession(ctx context.Context) error {
	if !c.IsValid() {
		return driver.ErrBadConn
	}
	if err := c.mysqlConn.ResetSession(ctx); err != nil {
		return err
	}
	if time.Since(c.checked) < checkEvery {
		return nil
	}
	readOnly, err := c.numbers(ctx, "SELECT @@global.read_only")
	if err != nil {
		return driver.ErrBadConn // with any other error, database/sql would use the connection
	}
	if readOnly[0] != 0 {
		c.saw(ErrReadOnly)
		return driver.ErrBadConn
	}
	c.checked = time.Now()
	return nil
}

// numbers reads the one row of query, made of whole numbers not below 0.
func (c *conn) numbers(ctx context.Context, query string) ([]uint64, error) {
	rows, err := c.mysqlConn.QueryContext(ctx, query, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	v := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(v); err != nil {
		return nil, err
	}
	n := make([]uint64, len(v))
	for i, x := range v {
		switch x := x.(type) {
		case int64:
			n[i] = uint64(x)
		case uint64:
			n[i] = x
		case []byte:
			n[i], err = strconv.ParseUint(string(x), 10, 64)
		default:
			err = fmt.Errorf("%T", x)
		}
		if err != nil {
			return nil, fmt.Errorf("db: %s: column %d: %w", query, i+1, err)
		}
	}
	return n, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.exec(ctx, func(live context.Context) (driver.Result, error) {
		return c.mysqlConn.ExecContext(live, query, args)
	})
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.query(ctx, func(live context.Context) (driver.Rows, error) {
		return c.mysqlConn.QueryContext(live, query, args)
	})
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.mysqlConn.PrepareContext(ctx, query)
	c.saw(err)
	if err != nil {
		return nil, err
	}
	ms, ok := s.(mysqlStmt)
	if !ok {
		s.Close()
		return nil, fmt.Errorf("db: the MySQL driver's statement %T lacks a method the pool needs", s)
	}
	return stmt{mysqlStmt: ms, c: c}, nil
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	t, err := c.mysqlConn.BeginTx(ctx, opts)
	c.saw(err)
	if err != nil {
		return nil, err
	}
	c.tx = t
	return (*tx)(c), nil // no allocation per transaction
}

type stmt struct {
	mysqlStmt
	c *conn
}

func (s stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.exec(ctx, func(live context.Context) (driver.Result, error) {
		return s.mysqlStmt.ExecContext(live, args)
	})
}

func (s stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.query(ctx, func(live context.Context) (driver.Rows, error) {
		return s.mysqlStmt.QueryContext(live, args)
	})
}

// tx is a connection's transaction: a server made read-only while it ran
// refuses its COMMIT.
type tx conn

func (t *tx) Commit() error {
	err := t.tx.Commit()
	t.tx = nil
	(*conn)(t).saw(err)
	return err
}

func (t *tx) Rollback() error {
	err := t.tx.Rollback()
	t.tx = nil
	return err
}

// Ready reports whether the database answers and takes writes: a MySQL
// server with read_only on is not ready (ErrReadOnly).
func Ready(ctx context.Context, gdb *gorm.DB) error {
	if IsSQLite(gdb) {
		sqlDB, err := gdb.DB()
		if err != nil {
			return err
		}
		return sqlDB.PingContext(ctx)
	}
	var readOnly bool
	if err := gdb.WithContext(ctx).Raw("SELECT @@global.read_only").Row().Scan(&readOnly); err != nil {
		return err
	}
	if readOnly {
		return fmt.Errorf("%w: read_only is ON on the server the shop reaches: a replica, or a primary during a switchover", ErrReadOnly)
	}
	return nil
}
