// Package batch runs work per key in batches: the callers of one key who
// arrive while its work runs share the next run, as a group commit does.
package batch

import (
	"errors"
	"sync"
)

// ErrClosed answers an Add once Close has been called.
var ErrClosed = errors.New("batch: closed")

// Batcher gathers items per key. When an item is added and no run is out
// for its key, a goroutine of the Batcher calls run with what is gathered,
// then again with what gathered meanwhile, until nothing is left. Runs of
// one key never overlap; runs of different keys do. Close drains them.
type Batcher[K comparable, T any] struct {
	max   int
	run   func(key K, items []T)
	ended func(key K)

	mu      sync.Mutex
	queued  map[K][]T // a key is here while its runs are out
	closed  bool
	running sync.WaitGroup
}

// New returns a Batcher that passes run at most max items at a time (no
// bound if max <= 0). ended, if not nil, is called when a key's runs stop,
// with nothing gathered for it; no run of that key starts before it
// returns, so it may drop what the runs kept for the key. It must not call
// the Batcher.
func New[K comparable, T any](max int, run func(key K, items []T), ended func(key K)) *Batcher[K, T] {
	return &Batcher[K, T]{max: max, run: run, ended: ended, queued: make(map[K][]T)}
}

// Add gathers item for key's next run, and starts the runs if none is out.
// Once Close has been called it returns ErrClosed and drops item.
func (b *Batcher[K, T]) Add(key K, item T) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	items, out := b.queued[key]
	b.queued[key] = append(items, item)
	if !out {
		b.running.Go(func() { b.runs(key) })
	}
	return nil
}

// Queued reports how many items wait for key's next run, and whether its
// runs are out.
func (b *Batcher[K, T]) Queued(key K) (n int, out bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	items, out := b.queued[key]
	return len(items), out
}

// Close refuses new items and waits until the runs under way have handled
// everything gathered before it.
func (b *Batcher[K, T]) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.running.Wait()
}

// runs calls run for key until nothing is gathered.
func (b *Batcher[K, T]) runs(key K) {
	for {
		b.mu.Lock()
		items := b.queued[key]
		n := len(items)
		if b.max > 0 {
			n = min(n, b.max)
		}
		if n == 0 {
			delete(b.queued, key)
			if b.ended != nil {
				b.ended(key)
			}
			b.mu.Unlock()
			return
		}
		b.queued[key] = items[n:]
		b.mu.Unlock()
		b.run(key, items[:n:n])
	}
}
