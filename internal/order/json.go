package order

import (
	"strconv"
	"time"

	"github.com/stockguard/shop/internal/jsonenc"
)

// AppendJSON appends o as MarshalJSON shows it, byte for byte what
// encoding/json makes of it (json_test.go holds them equal), without its
// reflection or the second pass that encoding/json makes over a
// Marshaler's output: an order's answer and its events are written so.
// Items always lists its lines; sku and quantity are there only when it
// has one. It reports false, having appended nothing, for a time out of
// the years 0 to 9999, which encoding/json refuses.
func (o Order) AppendJSON(b []byte) ([]byte, bool) {
	start := len(b)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, o.ID, 10)
	items := o.Items
	if len(items) > 1 {
		o.SKU, o.Quantity = "", 0
	} else {
		items = nil
	}
	if o.SKU != "" {
		b = jsonenc.AppendString(append(b, `,"sku":`...), o.SKU)
	}
	b = jsonenc.AppendString(append(b, `,"user_id":`...), o.UserID)
	if o.Quantity != 0 {
		b = strconv.AppendInt(append(b, `,"quantity":`...), int64(o.Quantity), 10)
	}
	b = jsonenc.AppendString(append(b, `,"status":`...), o.Status)
	var ok bool
	if b, ok = appendTime(append(b, `,"created_at":`...), o.CreatedAt); !ok {
		return b[:start], false
	}
	for _, t := range [...]struct {
		name string
		at   *time.Time
		id   *string
	}{{name: "expires_at", at: o.ExpiresAt}, {name: "paid_at", at: o.PaidAt}, {name: "payment_id", id: o.PaymentID},
		{name: "cancelled_at", at: o.CancelledAt}, {name: "refunded_at", at: o.RefundedAt}} {
		switch {
		case t.at != nil:
			if b, ok = appendTime(append(append(append(b, `,"`...), t.name...), `":`...), *t.at); !ok {
				return b[:start], false
			}
		case t.id != nil:
			b = jsonenc.AppendString(append(append(append(b, `,"`...), t.name...), `":`...), *t.id)
		}
	}
	b = append(b, `,"items":[`...)
	if items == nil {
		b = appendLine(b, o.SKU, o.Quantity)
	}
	for i, l := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLine(b, l.SKU, l.Quantity)
	}
	return append(b, "]}"...), true
}

// appendLine appends one line of an order's items.
func appendLine(b []byte, sku string, quantity int) []byte {
	b = jsonenc.AppendString(append(b, `{"sku":`...), sku)
	b = strconv.AppendInt(append(b, `,"quantity":`...), int64(quantity), 10)
	return append(b, '}')
}

// appendTime appends t as time.Time.MarshalJSON does, or reports false
// for a year out of 0 to 9999, which it refuses.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = t.AppendFormat(append(b, '"'), time.RFC3339Nano)
	return append(b, '"'), true
}
