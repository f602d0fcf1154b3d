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
	for _, want := range []placed{
		{o: final}, {o: pending},
		{err: soldOutRefusal(r.SKU)}, {err: notFound(r.SKU)}, {err: limitReached(r.UserID, r.SKU, 1, 2)}, {err: keyReused(9)},
	} {
		answer, ok := kept(want)
		if !ok {
			t.Errorf("%+v is not kept", want)
			continue
		}
		got := replayKept(answer, r)
		if !got.replayed || got.o.ID != want.o.ID || got.o.Status != want.o.Status || !got.o.CreatedAt.Equal(want.o.CreatedAt) ||
			(got.o.ExpiresAt == nil) != (want.o.ExpiresAt == nil) || (want.o.ExpiresAt != nil && !got.o.ExpiresAt.Equal(*want.o.ExpiresAt)) ||
			(got.err == nil) != (want.err == nil) || (want.err != nil && got.err.Error() != want.err.Error()) {
			t.Errorf("kept as %q, read back as %+v; want %+v", answer, got, want)
		}
	}
	if answer, ok := kept(placed{err: stock.ErrBusy}); ok {
		t.Errorf("busy is kept as %q; it is not final", answer)
	}
	if got := replayKept("o7:x", r); got.err == nil || errors.Is(got.err, stock.ErrSoldOut) {
		t.Errorf("a malformed answer reads back as %+v, want an error", got)
	}
}
