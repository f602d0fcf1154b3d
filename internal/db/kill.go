package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// A statement whose caller gives up (its ctx ends) is ended on the
// server: KILL QUERY, sent over a connection of the killer's, stops it
// where it runs or waits, and releases its locks then, rather than when
// innodb_lock_wait_timeout ends its wait. The driver on its own would
// close the connection and leave the statement running, while the pool
// dials another. The statement fails with error 1317 and its connection
// serves again; the caller is answered its ctx's error, as from the
// driver. See docs/operations.md#replicated-mysql.
const (
	// killGrace is how long past its ctx's end a caller waits for its
	// statement to end and its connection to be kept. Past it, the driver
	// closes the connection, as it does on its own, and the KILL goes on.
	killGrace = time.Second
	// killWait bounds one KILL, its connection's dial included.
	killWait = 2 * time.Second
	// killConns is the most connections the killer keeps. A KILL takes
	// two round trips, and the killer's connections are apart from the
	// pool's, so that a KILL is sent while the pool is exhausted.
	killConns = 2
)

// killer ends on the server the statements whose callers gave up.
type killer struct {
	pool *sql.DB

	mu     sync.Mutex
	closed bool
	kills  sync.WaitGroup
}

func newKiller(c driver.Connector) *killer {
	pool := sql.OpenDB(c)
	pool.SetMaxOpenConns(killConns)
	pool.SetMaxIdleConns(killConns)
	pool.SetConnMaxIdleTime(time.Minute)
	return &killer{pool: pool}
}

var errKillerClosed = errors.New("db: the pool is closed")

// kill ends the statement that connection id runs on the server whose
// @@server_id is server, if the killer reaches that server.
func (k *killer) kill(ctx context.Context, server, id uint64) error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return errKillerClosed
	}
	k.kills.Add(1)
	k.mu.Unlock()
	defer k.kills.Done()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killWait)
	defer cancel()
	kc, err := k.pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("db: kill query %d: %w", id, err)
	}
	defer kc.Close()
	// The same id on another server is another connection.
	var at uint64
	if err := kc.QueryRowContext(ctx, "SELECT @@server_id").Scan(&at); err != nil {
		return fmt.Errorf("db: kill query %d: %w", id, err)
	}
	if at != server {
		kc.Raw(func(any) error { return driver.ErrBadConn }) // discards it: the endpoint has moved
		return fmt.Errorf("db: kill query %d: the endpoint reaches server %d, the statement's is %d", id, at, server)
	}
	if _, err := kc.ExecContext(ctx, "KILL QUERY "+strconv.FormatUint(id, 10)); err != nil {
		return fmt.Errorf("db: kill query %d: %w", id, err)
	}
	return nil
}

// Close waits for the KILLs under way, and closes the killer's pool.
func (k *killer) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.kills.Wait()
	return k.pool.Close()
}

// exec runs f, a statement of c, under ctx: f is given c.live in its
// place, and ctx is watched (watch).
func (c *conn) exec(ctx context.Context, f func(live context.Context) (driver.Result, error)) (driver.Result, error) {
	stop, err := c.watch(ctx)
	if err != nil {
		return nil, err
	}
	r, err := f(c.live)
	if err = c.end(ctx, stop, err); err != nil {
		r = nil
	}
	c.saw(err)
	return r, err
}

// query is exec for a query, whose watch ends as its rows close.
func (c *conn) query(ctx context.Context, f func(live context.Context) (driver.Rows, error)) (driver.Rows, error) {
	stop, err := c.watch(ctx)
	if err != nil {
		return nil, err
	}
	r, err := f(c.live)
	if err != nil {
		err = c.end(ctx, stop, err)
		c.saw(err)
		return nil, err
	}
	mr, ok := r.(mysqlRows)
	if !ok {
		c.end(ctx, stop, r.Close())
		return nil, fmt.Errorf("db: the MySQL driver's rows %T lack a method the pool needs", r)
	}
	if stop == nil {
		return mr, nil
	}
	return &rows{mysqlRows: mr, end: func(err error) error { return c.end(ctx, stop, err) }}, nil
}

// watch starts watching ctx for the statement c is about to run: if ctx
// ends before the statement does, cut ends it. stop is nil for a ctx that
// never ends.
func (c *conn) watch(ctx context.Context) (stop func() bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ctx.Done() == nil {
		return nil, nil
	}
	return context.AfterFunc(ctx, func() { c.cut(ctx) }), nil
}

// end is called with err as the statement that watch watched returns.
// If it was cut, end waits until the connection is kept, its KILL over,
// so that no KILL reaches a later statement, or until the driver has
// closed it; and an error is the caller's ctx's, as from the driver.
func (c *conn) end(ctx context.Context, stop func() bool, err error) error {
	if stop == nil || stop() {
		return err
	}
	c.back <- struct{}{}
	select {
	case <-c.done:
	case <-c.live.Done():
	}
	if err != nil {
		return ctx.Err()
	}
	return nil
}

// cut ends the statement of c whose caller's ctx ended: KILL QUERY, and
// the connection is kept; or, if the KILL fails or the statement has not
// returned within killGrace, the driver closes the connection.
func (c *conn) cut(ctx context.Context) {
	grace := time.AfterFunc(killGrace, c.abort)
	if err := c.p.killer.kill(ctx, c.server, c.id); err != nil {
		c.abort()
	}
	<-c.back
	grace.Stop()
	c.done <- struct{}{}
}

// mysqlRows is what database/sql uses of the driver's rows.
type mysqlRows interface {
	driver.Rows
	driver.RowsNextResultSet
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

// rows are a query's whose ctx is watched until they close.
type rows struct {
	mysqlRows
	end func(error) error
}

func (r *rows) Close() error {
	err := r.mysqlRows.Close()
	if r.end != nil {
		err, r.end = r.end(err), nil
	}
	return err
}
