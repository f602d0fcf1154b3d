package redispipe_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/stockguard/shop/internal/redispipe"
	"github.com/stockguard/shop/internal/testinfra"
)

// incr returns the key's new value: each call has its own answer.
var incr = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

// pipelines counts the pipelines a client sends.
type pipelines struct{ n atomic.Int32 }

func (*pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestPipeRun, on a Redis of its own (it flushes the scripts): concurrent
// calls share pipelines and each gets its own answer; scripts Redis lost
// are sent again in full; a call whose ctx has ended is not sent.
func TestPipeRun(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testinfra.OwnRedis(t)})
	t.Cleanup(func() { rdb.Close() })
	count := &pipelines{}
	rdb.AddHook(count)
	p := redispipe.New(rdb)
	ctx := t.Context()

	const calls = 200
	seen := make([]atomic.Bool, calls+1)
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			n, err := p.Run(ctx, incr, []string{"n"}).Int()
			switch {
			case err != nil:
				t.Errorf("Run: %v", err)
			case n < 1 || n > calls:
				t.Errorf("Run answered %d, want 1 to %d", n, calls)
			case seen[n].Swap(true):
				t.Errorf("two calls answered %d", n)
			}
		})
	}
	wg.Wait()
	if n := count.n.Load(); n >= calls {
		t.Errorf("%d pipelines for %d concurrent calls; want fewer", n, calls)
	}

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Run(ctx, incr, []string{"n"}).Int(); n != calls+1 || err != nil {
		t.Fatalf("Run after SCRIPT FLUSH: %d %v, want %d", n, err, calls+1)
	}

	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Run(ended, incr, []string{"n"}).Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with an ended ctx: %v, want context.Canceled", err)
	}
	// The next call is sent after the ended one would have been.
	if n, err := p.Run(ctx, incr, []string{"n"}).Int(); n != calls+2 || err != nil {
		t.Errorf("Run after the ended call: %d %v, want %d: the ended call was sent", n, err, calls+2)
	}
}

// TestPipeDo: plain commands share the pipelines of scripts, each with its
// own answer.
func TestPipeDo(t *testing.T) {
	t.Parallel()
	r := testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	count := &pipelines{}
	rdb.AddHook(count)
	p := redispipe.New(rdb)
	const calls = 100
	seen := make([]atomic.Bool, calls+1)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			var n int
			var err error
			if i%2 == 0 {
				n, err = p.Do(t.Context(), "INCR", r.Prefix+"n").Int()
			} else {
				n, err = p.Run(t.Context(), incr, []string{r.Prefix + "n"}).Int()
			}
			if err != nil || n < 1 || n > calls || seen[n].Swap(true) {
				t.Errorf("call %d answered %d, %v: want its own count", i, n, err)
			}
		})
	}
	wg.Wait()
	if n := count.n.Load(); n >= calls {
		t.Errorf("%d pipelines for %d concurrent calls; want fewer", n, calls)
	}
}

// TestPipeClose closes a Pipe under a burst of calls, and then its client:
// each call gets its answer or ErrClosed, and no goroutine of the Pipe is
// left. Not parallel: it compares the process's goroutines.
func TestPipeClose(t *testing.T) {
	r := testinfra.Redis(t)
	before := goleak.IgnoreCurrent()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	p := redispipe.New(rdb)
	if err := p.Run(t.Context(), incr, []string{r.Prefix + "n"}).Err(); err != nil {
		t.Fatal(err)
	}
	const calls = 100
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			err := p.Run(t.Context(), incr, []string{r.Prefix + "n"}).Err()
			if err != nil && !errors.Is(err, redispipe.ErrClosed) {
				t.Errorf("call %d: %v, want its answer or ErrClosed", i, err)
			}
		})
		if i == calls/2 {
			p.Close()
		}
	}
	wg.Wait()
	if err := p.Do(t.Context(), "GET", r.Prefix+"n").Err(); !errors.Is(err, redispipe.ErrClosed) {
		t.Errorf("a call after Close: %v, want ErrClosed", err)
	}
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}
