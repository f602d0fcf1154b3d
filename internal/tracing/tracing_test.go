package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stockguard/shop/internal/tracing"
)

// TestStartWithoutEndpoint: with no OTLP endpoint, Start installs nothing
// and the wiring adds no instrumentation.
func TestStartWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	shutdown, err := tracing.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tracing.Enabled() {
		t.Error("tracing is on with no endpoint")
	}
	if err := shutdown(t.Context()); err != nil {
		t.Error(err)
	}
	if _, span := tracing.Tracer.Start(t.Context(), "order"); span.IsRecording() {
		t.Error("a span is recorded with no endpoint")
	}
}

// TestStartBadProtocol: a protocol the shop does not speak is an error
// that names it, and tracing stays off.
func TestStartBadProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := tracing.Start(t.Context()); err == nil || tracing.Enabled() {
		t.Errorf("Start with http/json: %v, enabled %v; want an error, and tracing off", err, tracing.Enabled())
	}
}

// TestTraceparent: a span's traceparent reads back as its span context;
// no span, and a malformed one, read back as none.
func TestTraceparent(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	ctx, span := tp.Tracer("test").Start(t.Context(), "order")
	defer span.End()
	got := tracing.Traceparent(ctx)
	if sc := tracing.SpanContextOf(got); !sc.Equal(span.SpanContext().WithRemote(true)) {
		t.Errorf("traceparent %q reads back as %v; want %v", got, sc, span.SpanContext())
	}
	if got := tracing.Traceparent(context.Background()); got != "" {
		t.Errorf("no span's traceparent: %q", got)
	}
	if tracing.SpanContextOf("00-nonsense").IsValid() {
		t.Error("a malformed traceparent reads back as valid")
	}
}

// TestChildrenOnly: its tracers record a span only under one recorded.
func TestChildrenOnly(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	children := tracing.ChildrenOnly(tp).Tracer("redis")
	if _, root := children.Start(t.Context(), "ping"); root.IsRecording() {
		t.Error("a root span is recorded")
	}
	ctx, parent := tp.Tracer("test").Start(t.Context(), "order")
	_, child := children.Start(ctx, "evalsha")
	child.End()
	parent.End()
	if spans := exp.GetSpans(); len(spans) != 2 || spans[0].Name != "evalsha" || spans[0].Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("exported %v; want evalsha, child of order, then order", spans.Snapshots())
	}
}
