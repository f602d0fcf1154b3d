package idempotency_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/idempotency"
)

// TestAnswers pins the kept form of each answer, which records written by
// earlier releases and lua's scripts hold, and reads each back.
func TestAnswers(t *testing.T) {
	t.Parallel()
	created := time.UnixMicro(1_764_000_000_123_456).UTC()
	deadline := created.Add(15 * time.Minute)
	for _, tc := range []struct {
		a    idempotency.Answer
		kept string
	}{
		{idempotency.Answer{Kind: idempotency.Placed, ID: 7, Created: created}, "o7:1764000000123456"},
		{idempotency.Answer{Kind: idempotency.Placed, ID: 7, Created: created, Deadline: &deadline}, "o7:1764000000123456:1764000900123456"},
		{idempotency.Answer{Kind: idempotency.SoldOut}, "s"},
		{idempotency.Answer{Kind: idempotency.SoldOut, Short: "a\nb"}, "sa\nb"},
		{idempotency.Answer{Kind: idempotency.OverLimit, Limit: 2, Held: 1}, "l2:1"},
		{idempotency.Answer{Kind: idempotency.Reused, ID: 9}, "r9"},
		{idempotency.Answer{Kind: idempotency.NotFound}, "n"},
	} {
		if got := tc.a.Encode(); got != tc.kept {
			t.Errorf("%+v is kept as %q, want %q", tc.a, got, tc.kept)
		}
		if got, err := idempotency.ParseAnswer(tc.kept); err != nil || !reflect.DeepEqual(got, tc.a) {
			t.Errorf("%q reads back as %+v (%v), want %+v", tc.kept, got, err, tc.a)
		}
	}
	if got := idempotency.LimitPrefix(3) + "2"; got != (idempotency.Answer{Kind: idempotency.OverLimit, Limit: 3, Held: 2}).Encode() {
		t.Errorf("LimitPrefix(3) ended with 2 is %q, not the answer over the limit", got)
	}
	for _, bad := range []string{"", "o7", "o7:x", "o1:2:3:4", "l2", "rx", "n1", "done", "x"} {
		if a, err := idempotency.ParseAnswer(bad); err == nil {
			t.Errorf("%q reads as %+v, want an error", bad, a)
		}
	}
}
