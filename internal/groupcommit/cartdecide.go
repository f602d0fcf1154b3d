package groupcommit

import (
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// One batch of carts' transaction, in the three steps of a SKU's batch
// (decide.go): readCarts locks the rows of every SKU the carts have a
// line of, in ascending order, and reads them; grantCarts decides; and
// writeCarts takes each SKU's granted units with one conditional UPDATE,
// inserts the carts with two INSERTs and records their events with one.

// decideCarts is one batch of carts' transaction, in mode m. It returns
// each cart's answer; no SKU's stock is left to tell (sku is "").
func decideCarts[M any](tx *gorm.DB, m Mode, _ string, batch []*Request[M], known map[order.UserKey]order.Order, ids order.IDSource) ([]order.Answer, int, error) {
	now := order.Now()
	st, err := readCarts(tx, m.Rules, batch)
	if err != nil {
		return nil, 0, err
	}
	g := grantCarts(m, batch, known, st, now)
	if err := writeCarts(tx, &g, ids, batch); err != nil {
		return nil, 0, err
	}
	return answersOf(g.decisions, batch), 0, nil
}

// cartSKUs returns the SKUs that the batch's carts have lines of, in
// ascending order.
func cartSKUs[M any](batch []*Request[M]) []string {
	var skus []string
	for _, p := range batch {
		for _, l := range p.Order.Items {
			skus = append(skus, l.SKU)
		}
	}
	slices.Sort(skus)
	return slices.Compact(skus)
}

// readCarts locks the rows of the batch's SKUs, one after another in
// ascending order, and reads them, then what the batch needs beyond the
// stock.
func readCarts[M any](tx *gorm.DB, rules order.Rules, batch []*Request[M]) (cartState, error) {
	skus := cartSKUs(batch)
	st := cartState{skus: make(map[string]skuState, len(skus))}
	for _, sku := range skus {
		// Lock the row, then read it: the read sees every commit before
		// the lock, and nothing changes the row until this batch commits.
		found, err := stock.Lock(tx, sku)
		if err != nil {
			return st, err
		}
		s := skuState{found: found}
		if found {
			if s.available, s.epoch, err = stock.ReadEpoch(tx, sku); err != nil {
				return st, err
			}
		}
		st.skus[sku] = s
	}
	if w := rules.Window; w > 0 {
		now, err := db.Now(tx)
		if err != nil {
			return st, err
		}
		deadline := now.Add(w)
		st.deadline = &deadline
	}
	if rules.Limit > 0 {
		users := make([]string, len(batch))
		for i, p := range batch {
			users[i] = p.Order.UserID
		}
		st.held = make(map[string]map[string]int, len(skus))
		for _, sku := range skus {
			var err error
			if st.held[sku], err = order.Held(tx, sku, users); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// writeCarts writes what grantCarts decided: each SKU's units taken, in
// ascending order, the carts, with their ids set in g, their events,
// which keep their requests' traceparents, and the holdings.
func writeCarts[M any](tx *gorm.DB, g *cartGrants, ids order.IDSource, batch []*Request[M]) error {
	carts, parents := grantedOrders(g.decisions, batch)
	if len(carts) == 0 {
		return nil
	}
	for _, sku := range sortedKeys(g.taken) {
		took, err := stock.Take(tx, sku, g.taken[sku])
		if err != nil {
			return err
		}
		if !took {
			return fmt.Errorf("order: batch of carts: the stock of %s changed under the row lock", sku)
		}
	}
	if err := order.InsertCarts(tx, carts, ids); err != nil {
		return err
	}
	for _, sku := range sortedKeys(g.holdings) {
		if err := order.SetHeld(tx, sku, g.holdings[sku]); err != nil {
			return err
		}
	}
	setGranted(g.decisions, carts)
	return order.RecordTraced(tx, order.EventPlaced, carts, parents)
}

// sortedKeys returns m's keys in ascending order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
