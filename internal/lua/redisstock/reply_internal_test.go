package redisstock

import (
	"errors"
	"slices"
	"testing"

	"github.com/stockguard/shop/internal/stock"
)

// TestParseCart: cart.lua's replies parse into the cart's entries or its
// refusal, and a reply the script does not give, or that names a line the
// cart does not have, is ErrUnknownReply, never a business answer.
func TestParseCart(t *testing.T) {
	lines := []CartLine{{SKU: "a"}, {SKU: "b"}}
	ids, err := parseCart([]string{"ok", "1-0", "2-0"}, lines)
	if err != nil || !slices.Equal(ids, []string{"1-0", "2-0"}) {
		t.Errorf("ok: %v, %v", ids, err)
	}
	var short *stock.ShortError
	if _, err := parseCart([]string{"sold-out", "1", "2"}, lines); !errors.Is(err, ErrInDoubt) || !errors.As(err, &short) || !slices.Equal(short.SKUs, []string{"b"}) {
		t.Errorf("sold out in doubt: %v", err)
	}
	var line *LineError
	var over *OverLimitError
	if _, err := parseCart([]string{"limit", "2", "3"}, lines); !errors.As(err, &line) || line.SKU != "b" || !errors.As(err, &over) || over.Held != 3 {
		t.Errorf("limit: %v", err)
	}
	if _, err := parseCart([]string{"stale", "1"}, lines); !errors.As(err, &line) || line.SKU != "a" || !errors.Is(err, ErrStale) {
		t.Errorf("stale: %v", err)
	}
	for _, v := range [][]string{{}, {"ok", "1-0"}, {"limit", "1", "x"}, {"limit", "3", "1"}, {"sold-out", "0", "9"}, {"stale"}, {"what", "1"}} {
		if _, err := parseCart(v, lines); !errors.Is(err, ErrUnknownReply) {
			t.Errorf("%q: %v, want ErrUnknownReply", v, err)
		}
	}
}

// TestParseLoad: load.lua's replies parse into what it loaded, or
// ErrFenced; any other reply is ErrUnknownReply.
func TestParseLoad(t *testing.T) {
	ld, err := parseLoad([]string{"ok", "", "5", "1"}, "s", 1)
	if err != nil || ld.Before != nil || ld.After != 5 || ld.Pending != 1 {
		t.Errorf("ok without a state before: %+v, %v", ld, err)
	}
	if ld, err := parseLoad([]string{"ok", "4", "5", "0"}, "s", 1); err != nil || ld.Before == nil || *ld.Before != 4 {
		t.Errorf("ok: %+v, %v", ld, err)
	}
	if _, err := parseLoad([]string{"fenced", "7"}, "s", 1); !errors.Is(err, stock.ErrFenced) {
		t.Errorf("fenced: %v", err)
	}
	for _, v := range [][]string{{}, {"ok", "x", "5", "1"}, {"ok", "", "5"}, {"done"}} {
		if _, err := parseLoad(v, "s", 1); !errors.Is(err, ErrUnknownReply) {
			t.Errorf("%q: %v, want ErrUnknownReply", v, err)
		}
	}
}
