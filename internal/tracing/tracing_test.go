package tracing_test

import (
	"cmp"
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stockguard/shop/internal/testinfra"
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
	if _, span := tracing.Tracer().Start(t.Context(), "order"); span.IsRecording() {
		t.Error("a span is recorded with no endpoint")
	}
}

// TestStartExports: with an endpoint, Start exports over the protocol
// asked for, as the service OTEL_SERVICE_NAME names (shop unless set),
// with OTEL_RESOURCE_ATTRIBUTES; its shutdown sends what is left.
func TestStartExports(t *testing.T) {
	for _, tc := range []struct{ protocol, service, want string }{
		{"", "", "shop"},
		{"http/protobuf", "shop-eu", "shop-eu"},
		{"grpc", "", "shop"},
	} {
		t.Run(cmp.Or(tc.protocol, "default"), func(t *testing.T) {
			rcv := testinfra.OTLP(t)
			url := rcv.URL
			if tc.protocol == "grpc" {
				url = rcv.GRPCURL
				t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.protocol)
			t.Setenv("OTEL_SERVICE_NAME", tc.service)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
			shutdown, err := tracing.Start(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			_, span := tracing.Tracer().Start(t.Context(), "order")
			span.End()
			if err := shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			got := rcv.Received()
			if len(got) != 1 || len(rcv.Spans()) != 1 || rcv.Spans()[0].Name != "order" {
				t.Fatalf("received %v; want the one span", got)
			}
			attrs := map[string]string{}
			for _, kv := range got[0].Resource.Attributes {
				attrs[kv.Key] = kv.Value.GetStringValue()
			}
			if attrs["service.name"] != tc.want || attrs["deployment.environment.name"] != "test" {
				t.Errorf("resource %v; want service.name %s and deployment.environment.name test", attrs, tc.want)
			}
		})
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
