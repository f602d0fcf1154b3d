package fault

import (
	"context"
	"net/http"
	"testing"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/history"
)

// The fault tests' clients record every request they send, and what they
// were told, in the sale's history (internal/history); once the sale is
// settled, its final state is read from the database and the history is
// checked against the shop's model (internal/lincheck): some order of the
// operations, each at one point between its call and its answer, explains
// every answer. A history that none explains fails the test, and is kept
// with porcupine's page of it.

// order sends op, an order, to the shop at base with its key, and records
// it.
func (s *faultSale) order(ctx context.Context, client *http.Client, base string, op history.Op) (shoptest.Reply, error) {
	return shoptest.Recorded(s.Rec, op, func() (shoptest.Reply, error) {
		return shoptest.Post(ctx, client, base+"/api/v1/orders", op.Key, shoptest.OrderBody(op))
	})
}

// onSale starts a new history, and puts the burst's units of each of skus
// on sale.
func (s *faultSale) onSale(t *testing.T, skus ...string) {
	t.Helper()
	s.Rec = history.NewRecorder()
	for _, sku := range skus {
		s.putStock(t, sku)
	}
}

// TestFaultHistoryOfNone: the fault tests' buyers and check, on `none`
// over three shops with no fault: its oversell, or the units it loses
// to lost updates, make a history that no order of the answers explains.
func TestFaultHistoryOfNone(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	s := newFaultSale(t, "none")
	s.shape = &burstShape{units: 30, buyers: 120}
	s.burst(t, "f-none", nil)
	if r, _ := s.Verdict(t, "f-none"); r.Linearizable || r.Unknown {
		t.Errorf("none's sale: %s; want it not linearizable", r)
	}
}
