package order_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/order"
)

// everyField returns o with every exported field that is zero set, by
// reflection, so that a field added to order.Order shows in the
// comparison below without this test naming it.
func everyField(o order.Order) order.Order {
	v := reflect.ValueOf(&o).Elem()
	at := time.Date(2026, 11, 27, 8, 0, 0, 123456789, time.FixedZone("", 90*60))
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() || !f.IsZero() {
			continue
		}
		switch f.Interface().(type) {
		case int64, int:
			f.SetInt(7)
		case string:
			f.SetString("s-<&>")
		case *string:
			s := "pay-1"
			f.Set(reflect.ValueOf(&s))
		case time.Time:
			f.Set(reflect.ValueOf(at))
		case *time.Time:
			t := at.Add(time.Duration(i) * time.Minute)
			f.Set(reflect.ValueOf(&t))
		case *int64:
			n := int64(3)
			f.Set(reflect.ValueOf(&n))
		case []order.Line:
			f.Set(reflect.ValueOf([]order.Line{{SKU: "a", Quantity: 1}, {SKU: "b", Quantity: 2}}))
		default:
			panic("order.Order has a field of a type this test does not fill: " + v.Type().Field(i).Name)
		}
	}
	return o
}

// TestAppendOrder: an order's answer is byte for byte what encoding/json
// makes of it through order.Order.MarshalJSON.
func TestAppendOrder(t *testing.T) {
	created := time.Date(2026, 11, 27, 7, 21, 3, 450000000, time.UTC)
	orders := map[string]order.Order{
		"one line": {ID: 42, SKU: "sku-1", UserID: "buyer-1", Quantity: 1, Status: order.StatusCreated, CreatedAt: created},
		"whole second": {ID: 1, SKU: "s", UserID: "u", Quantity: 3, Status: order.StatusPending,
			CreatedAt: created.Truncate(time.Second)},
		"cart": {ID: 9, SKU: "a", UserID: "u", Quantity: 1, Status: order.StatusCreated, CreatedAt: created,
			Items: []order.Line{{SKU: "a", Quantity: 1}, {SKU: "b", Quantity: 2}}},
		"cart of one":  {ID: 9, SKU: "a", UserID: "u", Quantity: 1, Items: []order.Line{{SKU: "a", Quantity: 1}}},
		"escapes":      {ID: 5, SKU: `q"\<>&`, UserID: "é\u2028\x01\xff", Status: "created", CreatedAt: created},
		"zero":         {},
		"every field":  everyField(order.Order{}),
		"every, one":   everyField(order.Order{Items: []order.Line{{SKU: "x", Quantity: 4}}}),
		"negative ids": {ID: -1, SKU: "s", UserID: "u", Quantity: -2, CreatedAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.Local)},
	}
	for name, o := range orders {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, ok := o.AppendJSON([]byte("prefix"))
		if !ok || string(got) != "prefix"+string(want) {
			t.Errorf("%s:\n got %s (ok %v)\nwant prefix%s", name, got, ok, want)
		}
	}
}

// TestAppendOrderRefuses: a time that encoding/json refuses is left to
// it, with nothing appended.
func TestAppendOrderRefuses(t *testing.T) {
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, o := range []order.Order{{ID: 1, CreatedAt: far}, {ID: 1, PaidAt: &far}} {
		if _, err := json.Marshal(o); err == nil {
			t.Fatalf("encoding/json takes %v", o)
		}
		if got, ok := o.AppendJSON([]byte("p")); ok || string(got) != "p" {
			t.Errorf("appendOrder(%v) = %q, %v; want p, false", o, got, ok)
		}
	}
}

func BenchmarkEncodeOrder(b *testing.B) {
	o := order.Order{ID: 123456, SKU: "hot-sku", UserID: "buyer-abcdefgh-12345", Quantity: 1, Status: order.StatusCreated,
		CreatedAt: time.Date(2026, 11, 27, 7, 21, 3, 450000000, time.UTC)}
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(o)
		}
	})
	b.Run("appendOrder", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf, _ = o.AppendJSON(buf[:0])
		}
	})
}
