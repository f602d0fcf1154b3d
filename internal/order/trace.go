package order

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/shop/internal/tracing"
)

// traceBatch starts the span of one group-commit batch: a root of its
// own, since it serves many requests, linked to each request's span. Each
// request's span records the batch's span context in an event, so that
// the request's trace leads to the batch's, and the batch's to every
// request it served. system is the database's name in the conventions.
func traceBatch(system, strategy, sku string, batch []*pending) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return context.Background(), tracing.NoSpan
	}
	links := make([]trace.Link, 0, len(batch))
	for _, p := range batch {
		if l := trace.LinkFromContext(p.ctx); l.SpanContext.IsValid() {
			links = append(links, l)
		}
	}
	ctx, span := tracing.Tracer().Start(context.Background(), "order.batch", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(semconv.DBSystemNameKey.String(system), semconv.DBOperationName("BATCH"),
			semconv.DBOperationBatchSize(len(batch)), attribute.String("shop.strategy", strategy), attribute.String("shop.sku", sku)))
	if len(links) > 0 {
		sc := span.SpanContext()
		event := trace.WithAttributes(attribute.String("shop.batch.trace_id", sc.TraceID().String()),
			attribute.String("shop.batch.span_id", sc.SpanID().String()), semconv.DBOperationBatchSize(len(batch)))
		for _, p := range batch {
			trace.SpanFromContext(p.ctx).AddEvent("order.batch", event)
		}
	}
	return ctx, span
}
