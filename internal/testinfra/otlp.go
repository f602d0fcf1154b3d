package testinfra

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is an OpenTelemetry trace receiver, over OTLP/HTTP
// (http/protobuf) at URL and OTLP/gRPC at GRPCURL, as a collector takes
// them: it decodes each export request with OpenTelemetry's own protocol
// messages and keeps what it held.
type OTLPReceiver struct {
	URL, GRPCURL string

	mu      sync.Mutex
	exports []*tracepb.ResourceSpans
}

// OTLP starts a receiver that stops at the test's cleanup.
func OTLP(t testing.TB) *OTLPReceiver {
	t.Helper()
	r := &OTLPReceiver{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(r.serveHTTP))
	srv.Listener.Close()
	srv.Listener = listen(t)
	srv.Start()
	t.Cleanup(srv.Close)
	ln := listen(t)
	g := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(g, grpcTraces{r: r})
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	r.URL, r.GRPCURL = srv.URL, "http://"+ln.Addr().String()
	return r
}

func (r *OTLPReceiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	var export coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &export)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.keep(&export)
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(resp)
}

func (r *OTLPReceiver) keep(export *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exports = append(r.exports, export.ResourceSpans...)
}

// Received returns what the receiver holds: spans by the resource that
// sent them.
func (r *OTLPReceiver) Received() []*tracepb.ResourceSpans {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.ResourceSpans(nil), r.exports...)
}

// Spans returns every span the receiver holds.
func (r *OTLPReceiver) Spans() []*tracepb.Span {
	var spans []*tracepb.Span
	for _, rs := range r.Received() {
		for _, ss := range rs.ScopeSpans {
			spans = append(spans, ss.Spans...)
		}
	}
	return spans
}

type grpcTraces struct {
	coltracepb.UnimplementedTraceServiceServer
	r *OTLPReceiver
}

func (g grpcTraces) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.r.keep(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}
