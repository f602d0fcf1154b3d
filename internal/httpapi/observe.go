package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/tracing"
)

// RequestIDHeader carries a request's id, taken from the request or made,
// on the request and its response.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// RequestID returns the id of the request that ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestID takes the request's X-Request-Id, if it is 1 to 128 visible
// ASCII characters, or makes one; returns it on the response; and puts it
// in the request's ctx, where LogRequestIDs finds it.
func requestID(c *gin.Context) {
	id := c.GetHeader(RequestIDHeader)
	if !validRequestID(id) {
		var b [16]byte
		rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	c.Header(RequestIDHeader, id)
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), requestIDKey{}, id))
	c.Next()
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := range len(id) {
		if id[i] < '!' || id[i] > '~' {
			return false
		}
	}
	return true
}

// LogRequestIDs adds the request id, as request_id, to every record logged
// with the ctx of a request, and the trace_id and span_id of the span in
// the ctx, if any, so that a log line finds its trace.
func LogRequestIDs(h slog.Handler) slog.Handler { return requestIDHandler{h} }

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// untraced are the routes that make no span: probes, polled all the time.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// traceRequest makes the server span of a request, named by its method and
// route, as a child of the request's traceparent if it has one.
func traceRequest(c *gin.Context) {
	route := c.FullPath()
	if untraced[route] {
		c.Next()
		return
	}
	name := c.Request.Method
	if route != "" {
		name += " " + route
	}
	ctx := tracing.Propagator.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
	ctx, span := tracing.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		semconv.HTTPRequestMethodKey.String(c.Request.Method), semconv.HTTPRoute(route), semconv.URLPath(c.Request.URL.Path)))
	defer span.End()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
	status := c.Writer.Status()
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if p := c.GetString(problemKey); p != "" {
		span.SetAttributes(attribute.String("shop.problem", p))
	}
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// observe times every request, by route pattern, method and status.
func observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	latency(route, c.Request.Method, c.Writer.Status()).Observe(time.Since(start).Seconds())
}

// problemKey is where problem leaves the type of the problem it answered.
const problemKey = "httpapi.problem"

// countOrders counts the answers to order requests, payment callbacks and
// cancellations by outcome.
func (a *api) countOrders(c *gin.Context) {
	c.Next()
	outcome := "error"
	problem := c.GetString(problemKey)
	switch status := c.Writer.Status(); {
	case c.Writer.Header().Get(idempotency.ReplayedHeader) == "true":
		outcome = "replayed"
	case status == http.StatusCreated:
		outcome = "created"
	case status == http.StatusOK && strings.HasSuffix(c.FullPath(), "/pay"):
		outcome = "paid"
	case status == http.StatusOK:
		outcome = "cancelled"
	case problem == "sold-out", problem == "limit-reached", problem == "busy", problem == "order-expired", problem == "already-paid",
		problem == "unauthorized", problem == "forbidden", problem == "rate-limited", problem == "request-timeout":
		outcome = problem
	case problem == "idempotency-key-reused":
		outcome = "key-reused"
	case problem == "request-in-progress":
		outcome = "in-progress"
	case status < http.StatusInternalServerError:
		outcome = "invalid"
	}
	ordersCounted(a.Strategy, outcome).Inc()
}
