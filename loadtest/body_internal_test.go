package loadtest

import (
	"encoding/json"
	"testing"
)

// TestAppendOrderBody: an order's body is byte for byte what encoding/json
// makes of it.
func TestAppendOrderBody(t *testing.T) {
	for _, o := range []order{
		{UserID: "buyer-abc-1", SKU: "hot", Quantity: 1},
		{UserID: "u", Items: []line{{SKU: "a", Quantity: 1}, {SKU: "b", Quantity: 2}}},
		{UserID: `q"\<>&é` + "\x01", SKU: "s\u2028", Quantity: -3},
		{},
	} {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendOrderBody([]byte("p"), o); string(got) != "p"+string(want) {
			t.Errorf("%+v:\n got %s\nwant p%s", o, got, want)
		}
	}
}

func BenchmarkOrderBody(b *testing.B) {
	o := order{UserID: "buyer-abcdefgh-123456", SKU: "bench-hot-sku", Quantity: 1}
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(o)
		}
	})
	b.Run("appendOrderBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			appendOrderBody(make([]byte, 0, 128), o)
		}
	})
}
