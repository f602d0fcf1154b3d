package httpapi_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
)

// syncBuffer is a log destination that the handlers' goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRequestID: a request's X-Request-Id, or one made for it, comes back
// on the response and is on the lines logged for the request. The log
// line here is the warning of an idempotency store whose Redis is down (a
// port nothing listens on), on a refund's request.
func TestRequestID(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })

	w := newWorld(t, "atomic")
	gdb := w.db
	svc := order.NewService(gdb, w.placement(t), nil)
	if _, err := svc.SetStock(t.Context(), "sku-1", 10); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	srv := httptest.NewServer(httpapi.New(httpapi.Config{
		Strategy:       "atomic",
		Orders:         svc,
		Idempotency:    idempotency.NewStore(rdb, nil),
		RequestTimeout: 5 * time.Second,
		Log:            slog.New(httpapi.LogRequestIDs(slog.NewTextHandler(&logs, nil))),
	}))
	t.Cleanup(srv.Close)

	made := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for i, tc := range []struct {
		sent string
		kept bool
	}{{"req-42", true}, {"", false}, {"has space", false}, {strings.Repeat("x", 129), false}} {
		header := map[string]string{}
		if tc.sent != "" {
			header[httpapi.RequestIDHeader] = tc.sent
		}
		user := fmt.Sprintf("u%d", i)
		o, _, err := svc.Place(t.Context(), order.PlaceRequest{SKU: "sku-1", UserID: user, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		resp, answer := do(t, srv, call{method: "POST", path: fmt.Sprintf("/api/v1/orders/%d/refund", o.ID), body: `{"user_id":"` + user + `"}`, header: header})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: %d %s", tc.sent, resp.StatusCode, answer)
		}
		got := resp.Header.Get(httpapi.RequestIDHeader)
		if tc.kept && got != tc.sent || !tc.kept && !made.MatchString(got) {
			t.Errorf("sent %q, got %q back", tc.sent, got)
		}
		if !strings.Contains(logs.String(), "request_id="+got) {
			t.Errorf("no log line with request_id=%s in:\n%s", got, logs.String())
		}
	}
}

// TestLogTraceIDs: a line logged with the ctx of a traced request carries
// its trace_id and span_id; one without a span carries neither.
func TestLogTraceIDs(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	log := slog.New(httpapi.LogRequestIDs(slog.NewJSONHandler(&out, nil)))
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35}, SpanID: trace.SpanID{0x00, 0xf0, 0x67, 0xaa}, TraceFlags: trace.FlagsSampled})
	log.InfoContext(trace.ContextWithSpanContext(t.Context(), sc), "traced")
	log.InfoContext(t.Context(), "untraced")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"trace_id":"4bf92f35000000000000000000000000","span_id":"00f067aa00000000"`) ||
		strings.Contains(lines[1], "trace_id") {
		t.Errorf("logged %q; want the trace and span ids on the first line alone", lines)
	}
}
