package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// StartBatch starts the span of work done once for many callers, a
// group-commit batch or a Redis pipeline: a root of its own, since it
// serves many requests, linked to each caller's span, with the batch's
// size. Each caller's span records the batch's span context in an event
// named name, so that a request's trace leads to the batch's, and the
// batch's to every request it served. callers are the callers' contexts.
func StartBatch(name string, callers []context.Context, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !Enabled() {
		return context.Background(), NoSpan
	}
	links := make([]trace.Link, 0, len(callers))
	for _, c := range callers {
		if l := trace.LinkFromContext(c); l.SpanContext.IsValid() {
			links = append(links, l)
		}
	}
	size := semconv.DBOperationBatchSize(len(callers))
	ctx, span := Tracer().Start(context.Background(), name, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(append(attrs, size)...))
	if len(links) > 0 {
		sc := span.SpanContext()
		event := trace.WithAttributes(attribute.String("shop.batch.trace_id", sc.TraceID().String()),
			attribute.String("shop.batch.span_id", sc.SpanID().String()), size)
		for _, c := range callers {
			trace.SpanFromContext(c).AddEvent(name, event)
		}
	}
	return ctx, span
}
