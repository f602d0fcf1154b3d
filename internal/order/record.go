package order

import (
	"encoding/json"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/outbox"
	"github.com/stockguard/shop/internal/tracing"
)

// The types of order event, which every transition records in the outbox
// (internal/outbox) in the transaction that makes it.
const (
	EventPlaced    = "placed"
	EventPaid      = "paid"
	EventCancelled = "cancelled" // by the buyer
	EventExpired   = "expired"   // by the expiry job: the order is cancelled
	EventRefunded  = "refunded"
)

// record writes the events of type kind of orders in tx, each with the
// traceparent of the transaction's ctx, if it has one.
func record(tx *gorm.DB, kind string, orders ...Order) error {
	var parents []string
	if tp := tracing.Traceparent(tx.Statement.Context); tp != "" {
		parents = make([]string, len(orders))
		for i := range parents {
			parents[i] = tp
		}
	}
	return RecordTraced(tx, kind, orders, parents)
}

// RecordTraced writes the events of type kind of orders in tx, the i-th
// with parents[i], the traceparent of its request, when parents is not
// nil.
func RecordTraced(tx *gorm.DB, kind string, orders []Order, parents []string) error {
	entries := make([]outbox.Entry, len(orders))
	for i, o := range orders {
		payload, err := eventPayload(o)
		if err != nil {
			return err
		}
		entries[i] = outbox.Entry{OrderID: o.ID, Payload: payload}
	}
	return outbox.Record(tx, kind, entries, parents)
}

// eventPayload is o as an event carries it, its JSON (Order.AppendJSON).
func eventPayload(o Order) (string, error) {
	if b, ok := o.AppendJSON(make([]byte, 0, 256)); ok {
		return string(b), nil
	}
	b, err := json.Marshal(o)
	return string(b), err
}
