package httpapi

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stockguard/shop/internal/metrics"
)

// The series each request counts in, kept by their label values once
// made: WithLabelValues hashes the values and takes the vector's lock on
// every call. A series is made when first counted, as before, so /metrics
// shows the same series.

type latencyKey struct {
	route, method string
	status        int
}

type outcomeKey struct{ strategy, outcome string }

var (
	latencies sync.Map // latencyKey → prometheus.Observer
	outcomes  sync.Map // outcomeKey → prometheus.Counter
)

// latency is metrics.HTTPRequests' series of route, method and status.
func latency(route, method string, status int) prometheus.Observer {
	k := latencyKey{route, method, status}
	if o, ok := latencies.Load(k); ok {
		return o.(prometheus.Observer)
	}
	o, _ := latencies.LoadOrStore(k, metrics.HTTPRequests.WithLabelValues(route, method, strconv.Itoa(status)))
	return o.(prometheus.Observer)
}

// ordersCounted is metrics.Orders' series of strategy and outcome.
func ordersCounted(strategy, outcome string) prometheus.Counter {
	k := outcomeKey{strategy, outcome}
	if c, ok := outcomes.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := outcomes.LoadOrStore(k, metrics.Orders.WithLabelValues(strategy, outcome))
	return c.(prometheus.Counter)
}
