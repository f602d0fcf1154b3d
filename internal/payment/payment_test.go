package payment_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/payment"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	secret, body := []byte("0123456789abcdef0123456789abcdef"), []byte(`{"payment_id":"pay_1"}`)
	now := time.Unix(1_800_000_000, 0)
	good := payment.Sign(secret, now, body)
	tests := []struct {
		name   string
		secret []byte
		header string
		body   []byte
		at     time.Time
		ok     bool
	}{
		{"good", secret, good, body, now, true},
		{"good, a minute later", secret, good, body, now.Add(time.Minute), true},
		{"a rotated secret beside it", secret, good + ",v1=00ff", body, now, true},
		{"another body", secret, good, []byte(`{"payment_id":"pay_2"}`), now, false},
		{"another secret", []byte("another secret, just as long....."), good, body, now, false},
		{"older than the tolerance", secret, good, body, now.Add(payment.Tolerance + time.Second), false},
		{"from the future", secret, good, body, now.Add(-payment.Tolerance - time.Second), false},
		{"missing", secret, "", body, now, false},
		{"no time", secret, "v1=00", body, now, false},
		{"no shop secret", nil, good, body, now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := payment.Verify(tt.secret, tt.header, tt.body, tt.at)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, payment.ErrSignature)) {
				t.Errorf("Verify: %v, want ok %v", err, tt.ok)
			}
		})
	}
}
