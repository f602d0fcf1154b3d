// Package background runs work in goroutines that an owner ends and
// waits for: each gets a ctx that ends with its Group, so that every
// goroutine has an owner that starts it and one call that stops it.
package background

import (
	"context"
	"sync"
)

// Group is work run in the background until End.
type Group struct {
	ctx    context.Context // ends with End
	cancel context.CancelFunc

	mu    sync.Mutex
	ended bool
	work  sync.WaitGroup
}

// New returns a Group that runs work until End.
func New() *Group {
	ctx, cancel := context.WithCancel(context.Background())
	return &Group{ctx: ctx, cancel: cancel}
}

// Go runs fn in a goroutine with a ctx that ends with g, and reports
// true; once g has ended, it runs nothing and reports false.
func (g *Group) Go(fn func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended {
		return false
	}
	g.work.Go(func() { fn(g.ctx) })
	return true
}

// End ends g's ctx, and waits for the work it runs.
func (g *Group) End() {
	g.mu.Lock()
	g.ended = true
	g.mu.Unlock()
	g.cancel()
	g.work.Wait()
}
