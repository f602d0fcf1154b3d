package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/tracing"
)

// Published is one order event as a reader of the stream gets it, and as
// `shop events` prints it, one JSON line each.
type Published struct {
	ID      int64           `json:"id"`
	Order   int64           `json:"order"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"` // the order after the transition
	// TraceID is the trace of the request that made the transition, when
	// it was traced.
	TraceID string `json:"trace_id,omitempty"`
}

// ReadPublished reads an entry of the stream as the relay writes it
// (publish).
func ReadPublished(m redis.XMessage) (Published, error) {
	field := func(k string) string { s, _ := m.Values[k].(string); return s }
	var l Published
	var err1, err2 error
	l.ID, err1 = strconv.ParseInt(field("id"), 10, 64)
	l.Order, err2 = strconv.ParseInt(field("order"), 10, 64)
	l.Type, l.Payload = field("type"), json.RawMessage(field("payload"))
	if sc := tracing.SpanContextOf(field("traceparent")); sc.IsValid() {
		l.TraceID = sc.TraceID().String()
	}
	if err := errors.Join(err1, err2); err != nil || l.Type == "" || !json.Valid(l.Payload) {
		return Published{}, fmt.Errorf("not an order event: %v", m.Values)
	}
	return l, nil
}
