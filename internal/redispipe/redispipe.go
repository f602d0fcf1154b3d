// Package redispipe sends the Lua scripts and commands of concurrent
// callers to Redis together: all the calls that come while one pipeline is out go in the
// next, one write and one read for all of them, as group commit does for a
// database. An idle Pipe sends a call at once.
package redispipe

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/shop/internal/tracing"
)

// Pipe sends scripts to one Redis, or one Redis Cluster, in pipelines. Its
// methods may be called from any goroutine. Its owner closes it before the
// client.
type Pipe struct {
	rdb redis.UniversalClient

	mu      sync.Mutex
	queue   []*call
	sending bool // a goroutine is sending the queue
	closed  bool
	drains  sync.WaitGroup // the goroutine that sends the queue
}

// ErrClosed answers a call made after Close.
var ErrClosed = errors.New("redispipe: closed")

type call struct {
	ctx    context.Context
	script *redis.Script // nil for a command, args
	keys   []string
	args   []any
	cmd    *redis.Cmd    // set before done is closed
	done   chan struct{} // closed when cmd has its answer
}

// pipeTimeout bounds a pipeline. A caller whose ctx ends first stops
// waiting; its script may still run, as a single call's may after a
// timeout.
const pipeTimeout = 5 * time.Second

// New returns a Pipe to rdb.
func New(rdb redis.UniversalClient) *Pipe { return &Pipe{rdb: rdb} }

// Run runs script as EVALSHA in the next pipeline, and as EVAL if Redis does
// not have it (it restarted empty). Scripts run in the order of their Run
// calls.
func (p *Pipe) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return p.call(&call{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})})
}

// Do sends the command args, such as GET and its key, in the next
// pipeline.
func (p *Pipe) Do(ctx context.Context, args ...any) *redis.Cmd {
	return p.call(&call{ctx: ctx, args: args, done: make(chan struct{})})
}

func (p *Pipe) call(c *call) *redis.Cmd {
	ctx := c.ctx
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ErrClosed)
		return cmd
	}
	p.queue = append(p.queue, c)
	start := !p.sending
	p.sending = true
	if start {
		p.drains.Add(1)
	}
	p.mu.Unlock()
	if start {
		go p.drain()
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(context.Cause(ctx))
		return cmd
	}
}

// Close waits for the pipelines under way, whose callers get their
// answers; a call after it fails with ErrClosed.
func (p *Pipe) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.drains.Wait()
}

// drain sends the queue, one pipeline at a time, until it is empty.
func (p *Pipe) drain() {
	defer p.drains.Done()
	for {
		p.mu.Lock()
		batch := p.queue
		p.queue = nil
		if len(batch) == 0 {
			p.sending = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.send(batch)
	}
}

func (p *Pipe) send(batch []*call) {
	ctx, span := traceSend(batch)
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, pipeTimeout)
	defer cancel()
	pl := p.rdb.Pipeline()
	sent := make([]*call, 0, len(batch))
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil { // its caller has stopped waiting: not sent
			c.cmd = redis.NewCmd(c.ctx)
			c.cmd.SetErr(err)
			close(c.done)
			continue
		}
		if c.script == nil {
			c.cmd = pl.Do(ctx, c.args...)
		} else {
			c.cmd = c.script.EvalSha(ctx, pl, c.keys, c.args...)
		}
		sent = append(sent, c)
	}
	if len(sent) > 0 {
		_, _ = pl.Exec(ctx) // each command has its own error
	}
	for _, c := range sent {
		if c.script != nil && redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			c.cmd = c.script.Eval(ctx, p.rdb, c.keys, c.args...)
		}
		close(c.done)
	}
}

// traceSend starts the span of one pipeline, linked to the span of each
// caller in it (tracing.StartBatch), when one of them is traced: its Redis
// commands are then spans in the pipeline's trace, which each caller's
// trace leads to. db.operation.name is EVALSHA when it runs a script.
func traceSend(batch []*call) (context.Context, trace.Span) {
	callers := make([]context.Context, len(batch))
	op, traced := "PIPELINE", false
	for i, c := range batch {
		callers[i] = c.ctx
		traced = traced || tracing.Recording(c.ctx)
		if c.script != nil {
			op = "EVALSHA"
		}
	}
	if !traced {
		return context.Background(), tracing.NoSpan
	}
	return tracing.StartBatch("redis.batch", callers, semconv.DBSystemNameRedis, semconv.DBOperationName(op))
}
