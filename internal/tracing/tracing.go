// Package tracing follows one order through the shop with OpenTelemetry:
// it sets the SDK up from the standard OTEL_* environment variables, and
// holds the few helpers the packages that make spans share. With no OTLP
// endpoint set, nothing is exported and the shop wires no instrumentation:
// the spans that the code starts itself are the API's no-ops. See
// docs/operations.md#tracing.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is the service.name of the shop's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise.
const DefaultServiceName = "shop"

// scope names the shop's own spans.
const scope = "github.com/stockguard/shop"

// Tracer makes the shop's own spans: the provider's that Start installed
// last, or the global one's, a no-op unless someone set it.
func Tracer() trace.Tracer { return tracer.Load().Tracer }

type tracerOf struct{ trace.Tracer }

var tracer atomic.Pointer[tracerOf]

func init() { tracer.Store(&tracerOf{otel.Tracer(scope)}) }

// Propagator reads and writes W3C traceparent headers, whatever the
// global propagator is.
var Propagator = propagation.TraceContext{}

var enabled atomic.Bool

// Enabled reports whether Start installed an exporter: the wiring adds the
// HTTP, Redis and SQL instrumentation only then.
func Enabled() bool { return enabled.Load() }

// Start installs the tracer provider that the process's OTEL_* variables
// describe, and returns its shutdown, which flushes the spans not sent
// yet. With neither OTEL_EXPORTER_OTLP_ENDPOINT nor
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, it installs nothing, and
// shutdown does nothing. The exporter reads its other OTEL_EXPORTER_OTLP_*
// variables itself, and the provider OTEL_TRACES_SAMPLER and its _ARG.
func Start(ctx context.Context) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(Propagator, propagation.Baggage{}))
	if os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := exporter(ctx, protocol())
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID(),
		resource.WithFromEnv()) // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, errors.Join(fmt.Errorf("tracing: resource: %w", err), exp.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	tracer.Store(&tracerOf{tp.Tracer(scope)})
	enabled.Store(true)
	return func(ctx context.Context) error {
		enabled.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// protocol is the OTLP protocol the variables ask for, the traces' own
// first.
func protocol() string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(k); p != "" {
			return p
		}
	}
	return "http/protobuf"
}

func exporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	switch protocol {
	case "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	}
	return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: the shop speaks http/protobuf and grpc", protocol)
}

// NoSpan is the span of what is not traced: ending it does nothing.
var NoSpan = trace.SpanFromContext(context.Background())

// Recording reports whether ctx holds a span being recorded. A child of
// one that is not would be neither: code that makes many spans asks first,
// and spares itself their attributes.
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// FencingToken is the attribute of a lock's fencing token.
func FencingToken(t int64) attribute.KeyValue { return attribute.Int64("shop.lock.fencing_token", t) }

// Traceparent is the W3C traceparent of the span in ctx, or "" when ctx
// has none.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	Propagator.Inject(ctx, c)
	return c["traceparent"]
}

// SpanContextOf parses a traceparent that Traceparent wrote; it is not
// valid when tp is empty or malformed.
func SpanContextOf(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}
