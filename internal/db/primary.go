package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
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
// same server. Each is closed as it is next taken from the pool or
// returned to it, and never serves another statement.
// See docs/operations.md#a-read-only-database.
type primaryOnly struct {
	driver.Connector
	gen atomic.Uint64 // the connections opened before the last read-only answer have an older one
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

func (p *primaryOnly) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := p.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	mc, ok := dc.(mysqlConn)
	if !ok {
		dc.Close()
		return nil, fmt.Errorf("db: the MySQL driver's connection %T lacks a method the pool needs", dc)
	}
	return &conn{mysqlConn: mc, p: p, gen: p.gen.Load(), checked: time.Now()}, nil
}

// conn is one connection of a primaryOnly pool. database/sql uses it from
// one goroutine at a time.
type conn struct {
	mysqlConn
	p       *primaryOnly
	gen     uint64
	checked time.Time // when its server last said it takes writes, or when it was opened
	refused atomic.Bool
	tx      driver.Tx // the transaction under way, if any
}

// saw notes err: a read-only refusal takes the connection, and every one
// opened before it, out of the pool.
func (c *conn) saw(err error) {
	if err != nil && IsReadOnly(err) {
		c.refused.Store(true)
		c.p.gen.CompareAndSwap(c.gen, c.gen+1) // once per switchover: a stale connection does not drop newer ones
	}
}

// IsValid is asked as the connection returns to the pool.
func (c *conn) IsValid() bool {
	return !c.refused.Load() && c.gen == c.p.gen.Load() && c.mysqlConn.IsValid()
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
	readOnly, err := c.readOnly(ctx)
	if readOnly {
		c.saw(ErrReadOnly)
	}
	if err != nil || readOnly {
		return driver.ErrBadConn // with any other error, database/sql would use the connection
	}
	c.checked = time.Now()
	return nil
}

// readOnly asks the server whether it refuses writes.
func (c *conn) readOnly(ctx context.Context) (bool, error) {
	rows, err := c.mysqlConn.QueryContext(ctx, "SELECT @@global.read_only", nil)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		return false, err
	}
	switch x := v[0].(type) {
	case int64:
		return x != 0, nil
	case []byte:
		return string(x) != "0", nil
	}
	return false, fmt.Errorf("db: @@global.read_only is %T", v[0])
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.mysqlConn.ExecContext(ctx, query, args)
	c.saw(err)
	return r, err
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.mysqlConn.QueryContext(ctx, query, args)
	c.saw(err)
	return r, err
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
	r, err := s.mysqlStmt.ExecContext(ctx, args)
	s.c.saw(err)
	return r, err
}

func (s stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.mysqlStmt.QueryContext(ctx, args)
	s.c.saw(err)
	return r, err
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
