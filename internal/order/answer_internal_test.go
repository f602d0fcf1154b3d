package order

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/stock"
)

// TestKeptAnswers: every final answer reads back from its kept form as the
// same answer, a pending order's deadline included; an answer that is not
// final is not kept.
func TestKeptAnswers(t *testing.T) {
	r := PlaceRequest{SKU: "phone", UserID: "ann", Quantity: 2, IdempotencyKey: "k1"}
	key := r.IdempotencyKey
	created := time.UnixMicro(1_764_000_000_123_456).UTC()
	deadline := created.Add(15 * time.Minute)
	final := Order{ID: 7, SKU: r.SKU, UserID: r.UserID, Quantity: r.Quantity, Status: StatusCreated, IdempotencyKey: &key, CreatedAt: created}
	pending := final
	pending.Status, pending.ExpiresAt = StatusPending, &deadline
	for _, want := range []Answer{
		{Order: final}, {Order: pending},
		{Err: SoldOut(r.SKU)}, {Err: NotFound(r.SKU)}, {Err: LimitReached(r.UserID, r.SKU, 1, 2)}, {Err: keyReused(9)},
	} {
		answer, ok := Stored(want)
		if !ok {
			t.Errorf("%+v is not kept", want)
			continue
		}
		got := ReplayStored(answer, r)
		if !got.Replayed || got.Order.ID != want.Order.ID || got.Order.Status != want.Order.Status || !got.Order.CreatedAt.Equal(want.Order.CreatedAt) ||
			(got.Order.ExpiresAt == nil) != (want.Order.ExpiresAt == nil) || (want.Order.ExpiresAt != nil && !got.Order.ExpiresAt.Equal(*want.Order.ExpiresAt)) ||
			(got.Err == nil) != (want.Err == nil) || (want.Err != nil && got.Err.Error() != want.Err.Error()) {
			t.Errorf("kept as %q, read back as %+v; want %+v", answer, got, want)
		}
	}
	if answer, ok := Stored(Answer{Err: stock.ErrBusy}); ok {
		t.Errorf("busy is kept as %q; it is not final", answer)
	}
	if got := ReplayStored("o7:x", r); got.Err == nil || errors.Is(got.Err, stock.ErrSoldOut) {
		t.Errorf("a malformed answer reads back as %+v, want an error", got)
	}
}
