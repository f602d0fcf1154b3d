package groupcommit

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/shop/internal/tracing"
)

// traceBatch starts the span of one group-commit batch, linked to each
// request it served (tracing.StartBatch). system is the database's name in
// the conventions; sku is "" for a batch of carts.
func traceBatch[M any](system, strategy, sku string, batch []*Request[M]) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return context.Background(), tracing.NoSpan
	}
	callers := make([]context.Context, len(batch))
	for i, p := range batch {
		callers[i] = p.Ctx
	}
	attrs := []attribute.KeyValue{semconv.DBSystemNameKey.String(system), semconv.DBOperationName("BATCH"), attribute.String("shop.strategy", strategy)}
	if sku != "" { // a batch of carts has several
		attrs = append(attrs, attribute.String("shop.sku", sku))
	}
	return tracing.StartBatch("order.batch", callers, attrs...)
}
