package shoptest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/outbox"
)

// Follower is a `shop events` run whose printed events the test reads.
type Follower struct {
	Printed chan outbox.Published // closed once it exits
	cancel  context.CancelFunc
	done    chan error
}

// FollowEvents runs `shop events` with args on the stream of the Redis at
// addr.
func FollowEvents(t *testing.T, addr, stream string, args ...string) *Follower {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	f := &Follower{Printed: make(chan outbox.Published, 1<<16), cancel: cancel, done: make(chan error, 1)}
	env := map[string]string{"SHOP_REDIS_ADDR": addr, "SHOP_EVENTS_STREAM": stream}
	go func() {
		err := Run(ctx, append([]string{"events"}, args...), func(k string) string { return env[k] }, w, io.Discard)
		w.Close()
		f.done <- err
	}()
	go func() {
		defer close(f.Printed)
		lines := bufio.NewScanner(r)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var e outbox.Published
			if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
				t.Errorf("shop events printed %s: %v", lines.Bytes(), err)
				continue
			}
			f.Printed <- e
		}
	}()
	t.Cleanup(func() { cancel(); r.Close() })
	return f
}

// Next returns the next event the follower prints, or fails the test if
// none comes.
func (f *Follower) Next(t *testing.T) outbox.Published {
	t.Helper()
	select {
	case e, ok := <-f.Printed:
		if !ok {
			t.Fatal("shop events exited")
		}
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("shop events printed nothing within 30s")
	}
	return outbox.Published{}
}

// Stop interrupts the follower (SIGINT), as a reader stops it, and
// expects a clean exit.
func (f *Follower) Stop(t *testing.T) {
	t.Helper()
	f.cancel()
	select {
	case err := <-f.done:
		if err != nil {
			t.Errorf("shop events exited with %v after its ctx ended", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("shop events did not exit within 30s of its ctx ending")
	}
}
