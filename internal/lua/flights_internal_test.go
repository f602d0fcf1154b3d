package lua

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stockguard/shop/internal/groupcommit"
	"github.com/stockguard/shop/internal/order"
)

// TestSettlers: each reservation of a committed batch is ended in Redis
// once, by the request that made its order if one did, and a foreign
// reservation only by that request.
func TestSettlers(t *testing.T) {
	made := order.Answer{Order: order.Order{ID: 1}}
	replay := order.Answer{Order: order.Order{ID: 1}, Replayed: true}
	refused := order.Answer{Err: errors.New("sold out")}
	type req struct {
		entry   string
		foreign bool
		answer  order.Answer
	}
	for _, tc := range []struct {
		name string
		reqs []req
		want []bool
	}{
		{"own", []req{{"1", false, made}, {"2", false, replay}, {"3", false, refused}}, []bool{true, true, true}},
		{"a retry's, then its holder's", []req{{"1", true, made}, {"1", false, replay}}, []bool{true, false}},
		{"its holder's, then a retry's", []req{{"1", false, made}, {"1", true, replay}}, []bool{true, false}},
		{"twice refused", []req{{"1", false, refused}, {"1", true, refused}}, []bool{true, false}},
		{"foreign, not made here", []req{{"1", true, replay}, {"2", true, refused}}, []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := make([]*groupcommit.Request[reservation], len(tc.reqs))
			answers := make([]order.Answer, len(tc.reqs))
			for i, r := range tc.reqs {
				batch[i] = &groupcommit.Request[reservation]{Meta: reservation{entry: r.entry, bucket: "sku", foreign: r.foreign}}
				answers[i] = r.answer
			}
			if got := settlers(batch, answers); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("settlers = %v, want %v", got, tc.want)
			}
		})
	}
}
