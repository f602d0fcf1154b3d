package db

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"
)

// database/sql opens a connection under its caller's ctx, and drops it
// when that ends first. After a failover every connection of the pool is
// opened anew, one by one as callers need them; when opening one (the
// dial, the handshake through the endpoint and the first query) takes
// longer than any caller has left, none is ever opened, and the pool
// stays empty while callers keep coming. That is what a SKU's queue
// (stock.Queued) meets: its turn goes to the buyer that has waited
// longest, the one with the least time left, who gives up and hands the
// turn to the next in the same state. On a loaded 2-core machine, the
// opening took 0.1 to 5 s while the buyer at the head of the queue had
// a few milliseconds left, and no shop sold for 6 to 9 s after the new
// primary took writes. So a connection whose caller gives up goes on
// opening, within connectWait, and once open it serves the next caller
// that needs one: a spare.

const (
	// connectWait bounds the opening of a connection that its caller
	// left, or that database/sql opens for its waiters with no deadline.
	connectWait = 10 * time.Second
	// maxSpares is the most connections left by their callers that are
	// opening or waiting for the next caller at a time; the connection of
	// a caller that gives up past it is dropped, as database/sql does. A
	// few serve the next callers at once, and the pool grows from them
	// as it does.
	maxSpares = 4
)

// spares are the connections that callers left while they opened.
type spares struct {
	ready chan *conn // open, for the next caller

	mu      sync.Mutex
	pending int // opening or ready
	closed  bool
}

func newSpares() spares { return spares{ready: make(chan *conn, maxSpares)} }

// dialed is the outcome of opening a connection.
type dialed struct {
	c   *conn
	err error
}

// Connect returns a spare, if one is ready; or opens a connection, which
// its caller may leave as a spare when its ctx ends first.
func (p *primaryOnly) Connect(ctx context.Context) (driver.Conn, error) {
	if c := p.spares.take(); c != nil {
		return c, nil
	}
	opening, cancel := context.WithTimeout(context.WithoutCancel(ctx), connectWait)
	opened := make(chan dialed, 1)
	go func() {
		c, err := p.dial(opening)
		opened <- dialed{c, err}
	}()
	select {
	case d := <-opened:
		cancel()
		if d.err != nil {
			return nil, d.err
		}
		return d.c, nil
	case <-ctx.Done():
		p.spares.keep(opened, cancel)
		return nil, fmt.Errorf("db: connect: %w", ctx.Err())
	}
}

// keep waits for the connection being opened, for the next caller, if
// fewer than maxSpares are kept; else it ends the opening, and closes
// the connection if it opened all the same. cancel ends the opening.
func (s *spares) keep(opened <-chan dialed, cancel context.CancelFunc) {
	s.mu.Lock()
	kept := !s.closed && s.pending < maxSpares
	if kept {
		s.pending++
	}
	s.mu.Unlock()
	go func() {
		if !kept {
			cancel()
		}
		d := <-opened
		cancel()
		if !kept {
			closeDialed(d)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if d.err != nil || s.closed {
			s.pending--
			closeDialed(d)
			return
		}
		s.ready <- d.c // never blocks: pending counts it
	}()
}

// take returns a spare that may serve, or nil. One opened more than
// checkEvery ago, or since the pool left its server, is closed: the
// pool's own connections are checked again by then.
func (s *spares) take() *conn {
	for {
		select {
		case c := <-s.ready:
			s.mu.Lock()
			s.pending--
			s.mu.Unlock()
			if time.Since(c.checked) < checkEvery && c.IsValid() {
				return c
			}
			c.Close()
		default:
			return nil
		}
	}
}

// close closes the spares ready, and those still opening once they open.
func (s *spares) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for {
		select {
		case c := <-s.ready:
			s.pending--
			c.Close()
		default:
			return
		}
	}
}

// closeDialed closes d's connection, if it opened.
func closeDialed(d dialed) {
	if d.err == nil {
		d.c.Close()
	}
}
