package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzSimpleOrder: a body that simpleOrder reads, encoding/json reads to
// the same order, refusing unknown fields as the shop does; the seeds
// are bodies of each kind, read by hand or left to encoding/json.
func FuzzSimpleOrder(f *testing.F) {
	for _, body := range []string{
		`{"sku":"sku-1","user_id":"u","quantity":1}`,
		`{"user_id":"buyer-abc-1","sku":"hot","quantity":100}`,
		`{"quantity":7,"sku":"a"}`,
		`{}`,
		`{"sku":"a","sku":"b"}`,
		`{"SKU":"a"}`,
		`{"sku":"a","items":[{"sku":"a","quantity":1}]}`,
		`{"sku":"a",}`,
		`{"sku":"a" }`,
		` {"sku":"a"}`,
		`{"sku":"a\"b"}`,
		`{"sku":"é"}`,
		`{"quantity":01}`,
		`{"quantity":0}`,
		`{"quantity":-1}`,
		`{"quantity":1.5}`,
		`{"quantity":1e3}`,
		`{"quantity":9999999999}`,
		`{"quantity":"1"}`,
		`{"sku":null}`,
		`{"user_id":"u"}{}`,
		`{"other":1}`,
		`{"sku":"a":1}`,
		`{"sku"}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast orderBody
		if !simpleOrder(body, &fast) {
			return
		}
		var slow orderBody
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&slow); err != nil {
			t.Fatalf("%s: read by hand as %+v, encoding/json refuses it: %v", body, fast, err)
		}
		if dec.More() {
			t.Fatalf("%s: read by hand, encoding/json finds more after it", body)
		}
		if fast.SKU != slow.SKU || fast.UserID != slow.UserID || fast.Quantity != slow.Quantity || fast.Items != nil || slow.Items != nil {
			t.Fatalf("%s: read by hand as %+v, by encoding/json as %+v", body, fast, slow)
		}
	})
}

// TestSimpleOrderReads: the bodies the load generator and most buyers
// send are read by hand.
func TestSimpleOrderReads(t *testing.T) {
	var b orderBody
	if !simpleOrder([]byte(`{"user_id":"buyer-abc-1","sku":"hot","quantity":12}`), &b) ||
		b.SKU != "hot" || b.UserID != "buyer-abc-1" || b.Quantity != 12 || b.Items != nil {
		t.Errorf("got %+v", b)
	}
}

func BenchmarkDecodeOrder(b *testing.B) {
	body := []byte(`{"user_id":"buyer-abcdefgh-123456","sku":"bench-hot-sku","quantity":1}`)
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var o orderBody
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			dec.Decode(&o)
			dec.Token()
		}
	})
	b.Run("simpleOrder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var o orderBody
			simpleOrder(body, &o)
		}
	})
}
