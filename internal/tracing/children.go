package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// ChildrenOnly is tp, whose tracers start a span only as the child of one
// being recorded. An instrumentation that cannot tell, such as a Redis
// client's, then traces an order's commands but not a readiness probe's
// PING or a job's lock renewal, each of which would be a trace of its own.
func ChildrenOnly(tp trace.TracerProvider) trace.TracerProvider { return childrenOnly{tp: tp} }

type childrenOnly struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (c childrenOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{t: c.tp.Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (c childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !Recording(ctx) {
		return ctx, NoSpan
	}
	return c.t.Start(ctx, name, opts...)
}
