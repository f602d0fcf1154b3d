package sale

import (
	"context"
	"errors"
	"strings"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// Load runs a plan's burst, steady load, closed loops and surge against a
// running deployment of the shop, whatever its strategy, at the URLs of
// Shop: it starts nothing. Each load has a SKU of its own, SKU-burst,
// SKU-steady, SKU-closed-<buyers>, SKU-refusals-<buyers> and SKU-surge,
// which must not be on sale yet: the audit reads
// their figures through the API, and leaves their orders where they are.
// With MySQLDSN, the database is audited too, as the bench audits it.
type Load struct {
	Plan     loadtest.Plan // its Instances are the targets; it names no strategies
	Shop     loadtest.Shop // the targets, the admin token, and the buyers
	SKU      string
	MySQLDSN string   // the deployment's database; empty audits through the API alone
	Progress Progress // may be nil
}

// deployment is the name the report gives the running deployment, in
// place of a strategy's.
const deployment = "deployment"

// Run checks that every target is ready, and refuses the run, having sent
// nothing, if one is not; then it runs the loads and audits each.
func (l Load) Run(ctx context.Context) (*loadtest.Report, error) {
	if err := l.Plan.Validate(); err != nil {
		return nil, err
	}
	var errs []error
	for _, url := range l.Shop.URLs {
		errs = append(errs, loadtest.Ready(ctx, url))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rep := loadtest.NewReport("load", l.Plan)
	rep.Backends = []loadtest.Backend{{Role: "shop", What: "a running deployment: " + strings.Join(l.Shop.URLs, ", ")},
		{Role: "database", What: "not read (no --mysql): audited through the API alone"}}
	r := runner{plan: l.Plan, progress: l.Progress, sku: l.SKU, api: true, keep: true,
		launch: func(context.Context, string, int) (Fleet, error) {
			return Fleet{Shop: l.Shop, Stop: func() ([]loadtest.Usage, error) { return nil, nil }}, nil
		}}
	if l.MySQLDSN != "" {
		gdb, what, err := openDB(ctx, l.MySQLDSN, false)
		if err != nil {
			return nil, err
		}
		defer db.Close(gdb)
		r.db, rep.Backends[1].What = gdb, what
	}
	var err error
	rep.Results, err = r.runAll(ctx, []strategy.Strategy{{Name: deployment}}, nil)
	rep.Finish()
	return rep, err
}
