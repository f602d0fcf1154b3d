package tracing

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// Statement starts the client span of one SQL statement on system
// ("mysql" or "sqlite"), named as the database conventions say: the
// operation and the table. rows above 1 is a batch: one statement of that
// many rows, as a group commit's INSERT.
// A statement of a request that is not traced makes none, and costs
// nothing but the check.
func Statement(ctx context.Context, system, operation, table string, rows int) (context.Context, trace.Span) {
	if !Recording(ctx) {
		return ctx, NoSpan
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, semconv.DBSystemNameKey.String(system), semconv.DBOperationName(operation))
	name := operation
	if table != "" {
		attrs = append(attrs, semconv.DBCollectionName(table))
		name += " " + table
	}
	if rows > 1 {
		attrs = append(attrs, semconv.DBOperationBatchSize(rows))
	}
	return Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// End ends span, recording err if there is one.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// GORM is a GORM plugin that makes a span of every statement that goes
// through GORM's callbacks. Statements written on the connection itself
// (a batch's INSERTs) make theirs with Statement.
type GORM struct{}

// Name implements gorm.Plugin.
func (GORM) Name() string { return "shop:tracing" }

// Initialize implements gorm.Plugin.
func (GORM) Initialize(gdb *gorm.DB) error {
	cb := gdb.Callback()
	const before, after = "shop:trace_before", "shop:trace_after"
	return errors.Join(
		cb.Create().Before("*").Register(before, start), cb.Create().After("*").Register(after, end),
		cb.Query().Before("*").Register(before, start), cb.Query().After("*").Register(after, end),
		cb.Update().Before("*").Register(before, start), cb.Update().After("*").Register(after, end),
		cb.Delete().Before("*").Register(before, start), cb.Delete().After("*").Register(after, end),
		cb.Row().Before("*").Register(before, start), cb.Row().After("*").Register(after, end),
		cb.Raw().Before("*").Register(before, start), cb.Raw().After("*").Register(after, end),
	)
}

// spanKey is where start leaves a statement's span for end.
const spanKey = "shop:trace_span"

func start(tx *gorm.DB) {
	ctx := tx.Statement.Context
	if ctx == nil || !Recording(ctx) {
		return // no trace to join: a statement alone is noise
	}
	_, span := Tracer().Start(ctx, "sql", trace.WithSpanKind(trace.SpanKindClient))
	tx.InstanceSet(spanKey, span)
}

func end(tx *gorm.DB) {
	v, ok := tx.InstanceGet(spanKey)
	if !ok {
		return
	}
	span := v.(trace.Span)
	op := operation(tx.Statement.SQL.String())
	name := op
	if t := tx.Statement.Table; t != "" {
		name += " " + t
		span.SetAttributes(semconv.DBCollectionName(t))
	}
	span.SetName(name)
	span.SetAttributes(semconv.DBSystemNameKey.String(tx.Dialector.Name()), semconv.DBOperationName(op))
	if tx.Error != nil && !errors.Is(tx.Error, gorm.ErrRecordNotFound) {
		span.RecordError(tx.Error)
		span.SetStatus(codes.Error, tx.Error.Error())
	}
	span.End()
}

// operation is a statement's first word, upper case: SELECT, UPDATE, ….
func operation(sql string) string {
	sql = strings.TrimSpace(sql)
	if i := strings.IndexAny(sql, " \t\n("); i > 0 {
		sql = sql[:i]
	}
	return strings.ToUpper(sql)
}
