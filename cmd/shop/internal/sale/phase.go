package sale

import (
	"context"
	"fmt"
	"slices"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/loadtest"
)

type loadFunc func(ctx context.Context, shop loadtest.Shop, sku string, progress func(loadtest.Answer)) (loadtest.Stats, error)

// phase puts stock units of a fresh sku on sale, or with a cart mix of
// each of its HotSKUs, sends the load, audits each SKU, and deletes their
// rows, so that later runs start from the same table sizes. With a meter,
// it reads what the load cost each class of process per order.
func (r runner) phase(ctx context.Context, shop loadtest.Shop, name, kind, sku string, cart, stock int, load loadFunc, m meter) (*loadtest.Phase, error) {
	if r.settle != nil {
		if err := r.settle(ctx); err != nil {
			return nil, err
		}
	}
	skus := loadtest.HotSKUs(sku, cart)
	if r.sku != "" {
		if err := shop.Fresh(ctx, skus); err != nil {
			return nil, err
		}
	}
	for _, sku := range skus {
		if err := shop.SetStock(ctx, sku, stock); err != nil {
			return nil, err
		}
	}
	var progress func(loadtest.Answer)
	if r.progress != nil {
		r.progress.Start(name, kind, stock*len(skus))
		progress = r.progress.Add
	}
	before := m.read()
	stats, err := load(ctx, shop, sku, progress)
	if err != nil {
		return nil, err
	}
	after := m.read()
	p, each, err := r.audit(ctx, shop, skus, stats)
	if err != nil {
		return nil, err
	}
	if m != nil {
		p.CPU = m.perOrder(before, after, p.Audit.Orders)
	}
	if stats.Errors > 0 {
		p.Problems = append(p.Problems, fmt.Sprintf("%d requests failed, first: %s", stats.Errors, stats.FirstError))
	}
	p.Problems = append(p.Problems, unserved(stats, p.Audit, each)...)
	p.Problems = append(p.Problems, cartProblems(stats, p.Audit)...)
	if shop.History != nil {
		file := name // the burst's history is the strategy's; another load's is named after it too
		if kind != "burst" {
			file += "-" + kind
		}
		if p.History, err = r.checkHistory(ctx, shop.History, file, skus); err != nil {
			return p, err
		}
		if !p.History.Linearizable {
			p.Problems = append(p.Problems, "history "+p.History.String())
		}
	}
	if r.progress != nil {
		r.progress.Audited(name, kind, p)
	}
	for _, sku := range skus {
		if err := r.forget(ctx, sku); err != nil {
			return p, err
		}
	}
	return p, nil
}

// audit audits the load's SKUs, through the API and in the database as
// the runner reads them, and returns the phase with its audit and the
// broken invariants, and each SKU's audit.
func (r runner) audit(ctx context.Context, shop loadtest.Shop, skus []string, stats loadtest.Stats) (*loadtest.Phase, []audit.Audit, error) {
	p := &loadtest.Phase{Stats: stats}
	var a audit.Audit
	var each []audit.Audit
	if r.api {
		api, apiEach, err := shop.Audit(ctx, skus, stats)
		if err != nil {
			return nil, nil, err
		}
		a, each = api, apiEach
		if r.db != nil { // the database's audit follows, the load's
			p.API, p.Problems = &api, violations("through the API: ", apiEach)
		}
	}
	if r.db != nil {
		var err error
		if a, each, err = audit.SKUs(ctx, r.db, skus, stats.SoldOutSKUs, stats.Acked); err != nil {
			return nil, nil, err
		}
	}
	p.Audit = a
	if len(skus) > 1 {
		p.SKUs = each
	}
	p.Problems = append(p.Problems, violations("", each)...)
	return p, each, nil
}

// unserved is the problem of the buyers sent away busy while stock was
// left for their orders, a unit of every SKU of it. The audit counts as
// undersold only what was left while buyers heard "sold out"; these are no
// better served: the sale ended unsold. A cart of which a SKU sold out
// could not have sold.
func unserved(stats loadtest.Stats, a audit.Audit, each []audit.Audit) []string {
	left := make(map[string]bool)
	for _, a := range each {
		left[a.SKU] = a.Available > 0
	}
	n := 0
	for _, skus := range stats.BusyOrders {
		if !slices.ContainsFunc(skus, func(sku string) bool { return !left[sku] }) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d buyers were sent away busy while %d units were left, stock for their orders", n, a.Available)}
}

// forget deletes sku's rows from the database, unless the runner keeps
// them.
func (r runner) forget(ctx context.Context, sku string) error {
	if r.keep {
		return nil
	}
	return forget(ctx, r.db, sku)
}

// violations lists the broken invariants of each audit of a load's SKUs,
// after prefix; of several SKUs, each SKU's by name.
func violations(prefix string, each []audit.Audit) []string {
	var v []string
	for _, a := range each {
		for _, broken := range a.Violations() {
			if len(each) > 1 {
				broken = a.SKU + ": " + broken
			}
			v = append(v, prefix+broken)
		}
	}
	return v
}
