package serve

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
)

// attr returns the string or integer value of span's attribute key, as a
// string, or "".
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return fmt.Sprint(v.IntValue)
			}
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// spanTrace is what a receiver holds of one trace: its spans, and the spans of
// the traces that link to it (a group commit's batch, the relay's
// publish).
type spanTrace struct {
	own, linked []*tracepb.Span
}

// traceOf gathers trace id's spans, and every span of a trace in which a
// span links to it.
func traceOf(spans []*tracepb.Span, id []byte) spanTrace {
	var tr spanTrace
	linking := map[string]bool{}
	for _, s := range spans {
		if string(s.TraceId) == string(id) {
			tr.own = append(tr.own, s)
		}
		for _, l := range s.Links {
			if string(l.TraceId) == string(id) {
				linking[string(s.TraceId)] = true
			}
		}
	}
	for _, s := range spans {
		if linking[string(s.TraceId)] {
			tr.linked = append(tr.linked, s)
		}
	}
	return tr
}

// find returns the first span of the trace, its own or linked, that match
// accepts.
func (tr spanTrace) find(match func(*tracepb.Span) bool) *tracepb.Span {
	for _, s := range append(tr.own, tr.linked...) {
		if match(s) {
			return s
		}
	}
	return nil
}

func (tr spanTrace) names() string {
	var n []string
	for _, s := range tr.own {
		n = append(n, s.Name)
	}
	for _, s := range tr.linked {
		n = append(n, "linked:"+s.Name)
	}
	return strings.Join(n, ", ")
}

// TestTraceOneOrder: with OTEL_EXPORTER_OTLP_ENDPOINT set to a receiver,
// one order sent with a traceparent makes one trace there, under each way
// an order goes: the server span, child of the caller's; the MySQL
// statements (the INSERT of the order, an UPDATE of the stock), in the
// trace or in its batch's, linked to it; under lua the reservation
// script, in the Redis pipeline linked to it, and under redis the lock, with its fencing token; and the relay's
// publish of the order's placed event, linked to it, whose stream entry
// and `shop events` line carry the trace. The probes make no span.
func TestTraceOneOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		strategy string
		redis    func(*tracepb.Span) bool // the span of the order's Redis work; nil: none
	}{
		{"lua", func(s *tracepb.Span) bool { // the reservation script, in the pipeline that sent it
			return s.Name == "redis.batch" && attr(s, "db.system.name") == "redis" && attr(s, "db.operation.name") == "EVALSHA"
		}},
		{"redis", func(s *tracepb.Span) bool {
			return s.Name == "lock acquire" && attr(s, "shop.lock.fencing_token") != ""
		}},
		{"batched", nil},
		{"atomic", nil},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			t.Parallel()
			testTraceOneOrder(t, tc.strategy, tc.redis)
		})
	}
}

func testTraceOneOrder(t *testing.T, strategy string, redisSpan func(*tracepb.Span) bool) {
	rcv := testinfra.OTLP(t)
	s := newShop(t, "SHOP_STRATEGY="+strategy, "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=100",
		"SHOP_RELAY_INTERVAL=50ms")
	s.putStock(t, "traced", 10)
	for _, probe := range []string{"/healthz", "/readyz"} {
		if code, body := shoptest.Send(t, "GET", s.base+probe, ""); code != http.StatusOK {
			t.Fatalf("%s: %d %s", probe, code, body)
		}
	}
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	code, body := shoptest.Send(t, "POST", s.base+"/api/v1/orders", `{"sku":"traced","user_id":"tia","quantity":1}`,
		"Idempotency-Key", "traced-1", "traceparent", "00-"+traceID+"-"+parentID+"-01")
	if code != http.StatusCreated {
		t.Fatalf("order: %d %s", code, body)
	}
	id, _ := hex.DecodeString(traceID)
	isServer := func(sp *tracepb.Span) bool {
		return string(sp.TraceId) == string(id) && sp.Name == "POST /api/v1/orders" && hex.EncodeToString(sp.ParentSpanId) == parentID &&
			sp.Kind == tracepb.Span_SPAN_KIND_SERVER && attr(sp, "http.response.status_code") == "201"
	}
	system := "mysql"
	if strings.HasPrefix(s.dsn, db.SQLitePrefix) { // go test -short
		system = "sqlite"
	}
	isOrderInsert := func(sp *tracepb.Span) bool {
		return attr(sp, "db.system.name") == system && attr(sp, "db.operation.name") == "INSERT" && attr(sp, "db.collection.name") == "orders"
	}
	isStockUpdate := func(sp *tracepb.Span) bool { // through GORM, whose statements a plugin traces
		return attr(sp, "db.system.name") == system && attr(sp, "db.operation.name") == "UPDATE"
	}
	isPublish := func(sp *tracepb.Span) bool {
		return sp.Kind == tracepb.Span_SPAN_KIND_PRODUCER && attr(sp, "shop.event.type") == "placed" && len(sp.Links) == 1 &&
			string(sp.Links[0].TraceId) == string(id)
	}
	var tr spanTrace
	deadline := time.Now().Add(20 * time.Second)
	for {
		tr = traceOf(rcv.Spans(), id)
		complete := tr.find(isServer) != nil && tr.find(isOrderInsert) != nil && tr.find(isStockUpdate) != nil && tr.find(isPublish) != nil &&
			(redisSpan == nil || tr.find(redisSpan) != nil)
		if complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s, the trace has %s; want the server span, the INSERT into orders, an UPDATE, the relay's publish and the Redis work", tr.names())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the trace: %s", tr.names())
	for _, sp := range rcv.Spans() {
		if strings.Contains(sp.Name, "/healthz") || strings.Contains(sp.Name, "/readyz") || sp.Name == "ping" {
			t.Errorf("a probe was traced: %s", sp.Name)
		}
	}
	if strategy == "batched" || strategy == "lua" {
		if batch := tr.find(func(sp *tracepb.Span) bool { return sp.Name == "order.batch" }); batch == nil || attr(batch, "db.operation.batch.size") != "1" {
			t.Errorf("the group commit's batch span: %v; want one of batch size 1, linked to the order", batch)
		}
	}
	checkStreamTrace(t, s, traceID)
}

// checkStreamTrace checks that the placed event's stream entry carries the
// trace, and that `shop events` shows it.
func checkStreamTrace(t *testing.T, s *shop, traceID string) {
	t.Helper()
	stream := s.prefix + "events"
	entries, err := s.redis.XRange(t.Context(), stream, "-", "+").Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("the stream %s: %v %v; want the placed event", stream, entries, err)
	}
	if tp, _ := entries[0].Values["traceparent"].(string); !strings.HasPrefix(tp, "00-"+traceID+"-") {
		t.Errorf("the placed event's traceparent: %q; want one of trace %s", tp, traceID)
	}
	f := shoptest.FollowEvents(t, s.redis.Options().Addr, stream, "--from-start")
	if e := f.Next(t); e.Type != "placed" || e.TraceID != traceID {
		t.Errorf("shop events printed %+v; want the placed event with trace_id %s", e, traceID)
	}
	f.Stop(t)
}

// TestTracesFlushedAtShutdown: the spans a shop has not sent yet when it
// is stopped are sent before it exits. The batch span processor would wait
// 10 minutes here before it sent them itself.
func TestTracesFlushedAtShutdown(t *testing.T) {
	t.Parallel()
	rcv := testinfra.OTLP(t)
	r := testinfra.Redis(t)
	base, cmd := shoptest.Start(t, "SHOP_MYSQL_DSN="+testinfra.MySQL(t), "SHOP_REDIS_ADDR="+r.Addr, "SHOP_REDIS_PREFIX="+r.Prefix,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=600000")
	if code, body := shoptest.Send(t, "GET", base+"/api/v1/stock/unknown", ""); code != http.StatusNotFound {
		t.Fatalf("stock of an unknown SKU: %d %s", code, body)
	}
	if n := len(rcv.Spans()); n != 0 {
		t.Fatalf("%d spans sent before the shop stopped; want them held", n)
	}
	shoptest.Stop(t, cmd)
	for _, sp := range rcv.Spans() {
		if sp.Name == "GET /api/v1/stock/:sku" && attr(sp, "http.response.status_code") == "404" {
			return
		}
	}
	t.Errorf("after the shop stopped, the receiver has %d spans, none of the request's", len(rcv.Spans()))
}
