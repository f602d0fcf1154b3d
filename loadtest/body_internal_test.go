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

// TestCreatedID: the id of a 201's answer is read by hand exactly when
// encoding/json would read the same id, and the answer names no other.
func TestCreatedID(t *testing.T) {
	for _, tt := range []struct {
		data string
		id   int64
		ok   bool
	}{
		{`{"id":42,"sku":"s","user_id":"u","quantity":1,"status":"created","items":[{"sku":"s","quantity":1}]}`, 42, true},
		{`{"id":7}`, 7, true},
		{`{"id":42,"sku":`, 0, false},               // not JSON
		{`{"id":42,"x":1,"id":43}`, 0, false},       // another id
		{`{"id":042}`, 0, false},                    // not JSON
		{`{"id":-1}`, 0, false},                     // left to encoding/json
		{`{"id":1.5}`, 0, false},                    // left to encoding/json
		{`{"id":1234567890123456789012}`, 0, false}, // too long
		{` {"id":1}`, 0, false},
		{``, 0, false},
	} {
		id, ok := createdID([]byte(tt.data))
		if id != tt.id || ok != tt.ok {
			t.Errorf("createdID(%s) = %d, %v; want %d, %v", tt.data, id, ok, tt.id, tt.ok)
		}
		var answer struct{ ID int64 }
		if ok && (json.Unmarshal([]byte(tt.data), &answer) != nil || answer.ID != id) {
			t.Errorf("createdID(%s) = %d; encoding/json reads %d", tt.data, id, answer.ID)
		}
	}
}
