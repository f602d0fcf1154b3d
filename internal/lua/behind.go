package lua

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/stock"
)

// A SKU's Redis state may be behind the database: a replica promoted to
// master, once its master failed, lacks the writes that had not reached
// it yet (replication is asynchronous), reservations, settlements and
// kept answers alike, though the database has their orders. Its epoch is
// the database's, so Reserve does not see it as stale. So after any Redis
// failure this process sees, each SKU's state is checked against the
// database before this process sells from it again: rebuild, under the
// stock row's lock, takes the database's stock less what is pending,
// drops from the log the reservations whose orders the database has, and
// sends every key to the database first if the state had lost writes.
// The reconciler does the same for every SKU on every run, for the
// processes that saw no failure. See docs/operations.md#redis-failover.

// epoch returns the SKU's epoch as this process last saw it, or reads it,
// once its state is checked against the database when a Redis failure
// came after its last check.
func (l *Lua) epoch(ctx context.Context, sku string) (int64, error) {
	l.mu.Lock()
	since := l.failures
	due := l.checked[sku] < since
	l.mu.Unlock()
	if due {
		return l.check(ctx, sku, since)
	}
	return l.known(ctx, sku)
}

// known returns the SKU's epoch as this process last saw it, or reads it:
// one read for every buyer who asks while it is under way. Were each to
// read, the first buyers of a SKU would reach Redis in the order their
// reads ended, which the database's pool hands connections out in at
// random, and the buyers who came after the epoch was known before all.
func (l *Lua) known(ctx context.Context, sku string) (int64, error) {
	for {
		l.mu.Lock()
		e, ok := l.epochs[sku]
		wait, reading := l.reading[sku]
		if !ok && !reading {
			wait = make(chan struct{})
			l.reading[sku] = wait
		}
		l.mu.Unlock()
		switch {
		case ok:
			return e, nil
		case !reading:
			return l.readEpoch(ctx, sku, wait)
		}
		select {
		case <-wait: // read, or failed: look again
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// readEpoch reads the SKU's epoch for every buyer waiting on wait, and
// closes it.
func (l *Lua) readEpoch(ctx context.Context, sku string, wait chan struct{}) (int64, error) {
	e, err := stock.Epoch(l.db.WithContext(ctx), sku)
	l.mu.Lock()
	delete(l.reading, sku)
	if err == nil {
		l.epochs[sku] = e
	}
	l.mu.Unlock()
	close(wait)
	return e, err
}

func (l *Lua) setEpoch(sku string, e int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epochs[sku] = e
}

// watch is how lua hears of every Redis failure of its client, those
// that its callers never see too (go-redis tries again, and waits out a
// failover: backend.NewRedis), and of every move of the server it dials:
// under Sentinel, a failover moves the master without an error, and the
// new master may lack the last writes. Either counts as a failure. A
// cluster's client dials through its nodes' clients, not this hook: a
// cluster's failover shows as an error.
type watch struct{ l *Lua }

func (w watch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			w.l.dialled(conn.RemoteAddr().String())
		}
		return conn, err
	}
}

func (w watch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		w.l.failed(err)
		return err
	}
}

func (w watch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			w.l.failed(cmd.Err())
		}
		return err
	}
}

// failed counts err if it is a Redis failure: the server unreachable, a
// connection lost, the cluster down or its slots moved.
func (l *Lua) failed(err error) {
	if backend.Unavailable(err) || backend.Moved(err) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.failures++
	}
}

// count returns the failures counted so far.
func (l *Lua) count() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures
}

// dialled counts a failure when addr, the server a new connection
// reached, is not the one the last reached.
func (l *Lua) dialled(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.server != "" && l.server != addr {
		l.failures++
	}
	l.server = addr
}

// check sets the SKU's state from the database, unless another buyer of
// this process has since the failures counted up to since.
func (l *Lua) check(ctx context.Context, sku string, since uint64) (int64, error) {
	release, err := l.exclusive(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	l.mu.Lock()
	done := l.checked[sku] >= since
	l.mu.Unlock()
	if done {
		return l.known(ctx, sku)
	}
	_, err = l.rebuild(ctx, sku, 0)
	if err != nil && !errors.Is(err, stock.ErrNotFound) { // not on sale: Reserve finds out
		return 0, err
	}
	l.mu.Lock()
	l.checked[sku] = max(l.checked[sku], since)
	l.mu.Unlock()
	return l.known(ctx, sku)
}

// refresh builds the SKU's state again, found stale under epoch seen,
// unless another buyer of this process has since.
func (l *Lua) refresh(ctx context.Context, sku string, seen int64) error {
	release, err := l.exclusive(ctx)
	if err != nil {
		return err
	}
	defer release()
	if e, err := l.known(ctx, sku); err == nil && e != seen {
		return nil
	}
	_, err = l.rebuild(ctx, sku, 0)
	if err != nil && !errors.Is(err, stock.ErrNotFound) {
		return fmt.Errorf("%w: %w", stock.ErrBusy, err)
	}
	return err
}

// exclusive waits for this process's turn to rebuild, one at a time.
func (l *Lua) exclusive(ctx context.Context) (release func(), err error) {
	select {
	case l.rebuilding <- struct{}{}:
		return func() { <-l.rebuilding }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", stock.ErrBusy, context.Cause(ctx))
	}
}
