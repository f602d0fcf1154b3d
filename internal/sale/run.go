package loadtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/app"
)

// Plan is the load each strategy gets.
type Plan struct {
	Strategies []string `json:"strategies,omitempty"` // by name; empty means every one in app.Strategies
	Instances  int      `json:"instances"`            // shop instances per strategy (K)
	Stock      int      `json:"stock"`                // units on sale in a burst (S)
	Burst      Burst    `json:"burst"`                // D buyers
	// Steady, when its Rate is set, follows the burst on a SKU of its own
	// with stock for every buyer: the latency of placing orders under a
	// steady load.
	Steady Steady `json:"steady"`
}

// Validate reports every bad setting at once.
func (p Plan) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if p.Instances < 1 {
		bad("instances must be at least 1, not %d", p.Instances)
	}
	if p.Stock <= 0 {
		bad("stock must be at least 1 unit, not %d", p.Stock)
	}
	if p.Burst.Buyers < p.Stock {
		bad("buyers (%d) must be at least the stock (%d): with fewer, nothing sells out and nothing can be oversold", p.Burst.Buyers, p.Stock)
	}
	if p.Burst.Concurrency < 0 || p.Steady.Concurrency < 0 {
		bad("concurrency must not be negative")
	}
	if p.Steady.Rate < 0 || p.Steady.Duration < 0 {
		bad("rate and duration must not be negative")
	}
	if p.Steady.Rate > 0 && p.Steady.Buyers() < 1 {
		bad("rate %g/s for %s sends no buyers: set a longer duration", p.Steady.Rate, p.Steady.Duration)
	}
	for _, name := range p.Strategies {
		if _, err := app.Lookup(name); err != nil {
			bad("%v; known: %s", err, strings.Join(app.Names(), ", "))
		}
	}
	return errors.Join(errs...)
}

// Servers says which servers beyond the database are at hand, by the names
// strategies list in Needs.
type Servers map[string]bool

// hint tells how to configure a server a strategy needs.
var hint = map[string]string{
	"redis":     "a Redis server (--redis or SHOP_REDIS_ADDR)",
	"redlock":   "independent Redis masters (--redlock or SHOP_REDLOCK_ADDRS)",
	"zookeeper": "a ZooKeeper server (--zk or SHOP_ZK_ADDRS)",
}

// Missing says what s needs that servers lack, or returns "".
func (servers Servers) Missing(s app.Strategy) string {
	var lack []string
	for _, need := range s.Needs {
		if !servers[need] {
			h, ok := hint[need]
			if !ok {
				h = "a " + need + " server"
			}
			lack = append(lack, h)
		}
	}
	if len(lack) == 0 {
		return ""
	}
	return "needs " + strings.Join(lack, " and ")
}

// Select returns the strategies to run and, as skipped results, those for
// which cannot gives a reason. A strategy named in the plan that cannot run
// is an error; one that would run only because the plan names none is
// skipped with the reason.
func (p Plan) Select(cannot func(app.Strategy) string) (run []app.Strategy, skipped []Result, err error) {
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, s := range app.Strategies {
		named := slices.Contains(p.Strategies, s.Name)
		if len(p.Strategies) > 0 && !named {
			continue
		}
		if why := cannot(s); why != "" {
			if named {
				errs = append(errs, fmt.Errorf("strategy %s %s", s.Name, why))
			}
			skipped = append(skipped, Result{Strategy: s.Name, Instances: p.Instances, Skipped: why})
			continue
		}
		run = append(run, s)
	}
	return run, skipped, errors.Join(errs...)
}

// Fleet is the running instances of one strategy.
type Fleet struct {
	Shop
	// Stop stops the instances and returns what each used, where known.
	Stop func() ([]Usage, error)
}

// Usage is what one shop process used over its life.
type Usage struct {
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	CPUSeconds   float64 `json:"cpu_seconds"` // user + system
}

// Launcher starts instances of the shop running strategy.
type Launcher func(ctx context.Context, strategy string, instances int) (Fleet, error)

// Result is one strategy's run.
type Result struct {
	Strategy  string `json:"strategy"`
	Instances int    `json:"instances"`
	// Note says how the strategy runs here when that differs from its
	// design, such as pessimistic on SQLite.
	Note    string  `json:"note,omitempty"`
	Skipped string  `json:"skipped,omitempty"` // why it did not run
	Error   string  `json:"error,omitempty"`   // why it did not finish
	Burst   *Phase  `json:"burst,omitempty"`
	Steady  *Phase  `json:"steady,omitempty"`
	Usage   []Usage `json:"usage,omitempty"` // per instance
	// Baseline names the raw loop that bounds this strategy's throughput,
	// and Fraction is the burst's throughput over the loop's.
	Baseline string  `json:"baseline,omitempty"`
	Fraction float64 `json:"fraction_of_baseline,omitempty"`
}

// Phase is one load and its audit.
type Phase struct {
	Stats
	Audit Audit `json:"audit"`
	// Problems lists the broken invariants, the failed requests, and
	// buyers sent away busy while stock was left; any makes the verdict
	// FAIL.
	Problems []string `json:"problems,omitempty"`
}

// Verdict is PASS, FAIL or SKIP.
func (r Result) Verdict() string {
	switch {
	case r.Skipped != "":
		return "SKIP"
	case r.Error != "", r.Burst == nil, len(r.Burst.Problems) > 0, r.Steady != nil && len(r.Steady.Problems) > 0:
		return "FAIL"
	}
	return "PASS"
}

// Runner runs a plan's strategies one at a time.
type Runner struct {
	Plan     Plan
	Launch   Launcher
	DB       *gorm.DB                  // the shop's database, for the audit
	Note     func(app.Strategy) string // how s runs here; may be nil
	Progress Progress                  // may be nil
	// Settle, if set, waits before each load until what the last one left
	// behind (statements still queued in the database) has drained.
	Settle func(context.Context) error
}

// Progress hears of a run as it goes. Add may be called concurrently.
type Progress interface {
	Begin(total int)      // how many answers the run will wait for
	Describe(what string) // what runs now
	Add()                 // one more answer
}

// Run starts the strategy's fleet, sends the load, audits the database and
// stops the fleet.
func (r Runner) Run(ctx context.Context, s app.Strategy) (res Result, err error) {
	res = Result{Strategy: s.Name, Instances: r.Plan.Instances}
	if r.Note != nil {
		res.Note = r.Note(s)
	}
	fleet, err := r.Launch(ctx, s.Name, r.Plan.Instances)
	if err != nil {
		return res, fmt.Errorf("%s: %w", s.Name, err)
	}
	defer func() {
		usage, stopErr := fleet.Stop()
		res.Usage = usage
		err = errors.Join(err, stopErr)
	}()
	tag := strings.ToLower(rand.Text()[:6])
	res.Burst, err = r.phase(ctx, fleet.Shop, "sale-"+s.Name+"-"+tag, r.Plan.Stock, r.Plan.Burst.Run)
	if err != nil || r.Plan.Steady.Rate <= 0 {
		return res, err
	}
	res.Steady, err = r.phase(ctx, fleet.Shop, "steady-"+s.Name+"-"+tag, r.Plan.Steady.Buyers(), r.Plan.Steady.Run)
	return res, err
}

type loadFunc func(ctx context.Context, shop Shop, sku string, progress func()) (Stats, error)

// phase puts stock units of a fresh sku on sale, sends the load, audits it,
// and deletes the sku's rows, so that later runs start from the same
// table sizes.
func (r Runner) phase(ctx context.Context, shop Shop, sku string, stock int, load loadFunc) (*Phase, error) {
	if r.Settle != nil {
		if err := r.Settle(ctx); err != nil {
			return nil, err
		}
	}
	if err := shop.Reset(ctx, sku, stock); err != nil {
		return nil, err
	}
	var progress func()
	if r.Progress != nil {
		progress = r.Progress.Add
	}
	stats, err := load(ctx, shop, sku, progress)
	if err != nil {
		return nil, err
	}
	audit, err := AuditSKU(ctx, r.DB, sku, stats.SoldOut, stats.Acked)
	if err != nil {
		return nil, err
	}
	p := &Phase{Stats: stats, Audit: audit, Problems: audit.Violations()}
	if stats.Errors > 0 {
		p.Problems = append(p.Problems, fmt.Sprintf("%d requests failed, first: %s", stats.Errors, stats.FirstError))
	}
	// The audit counts as undersold only what was left while buyers heard
	// "sold out". Buyers sent away busy while stock was left are no better
	// served: the sale ended unsold.
	if stats.Busy > 0 && audit.Available > 0 {
		p.Problems = append(p.Problems, fmt.Sprintf("%d buyers were sent away busy while %d units were left", stats.Busy, audit.Available))
	}
	return p, forget(ctx, r.DB, sku)
}

// forget deletes sku's orders and stock.
func forget(ctx context.Context, db *gorm.DB, sku string) error {
	db = db.WithContext(ctx)
	if err := db.Exec(`DELETE FROM orders WHERE sku = ?`, sku).Error; err != nil {
		return fmt.Errorf("loadtest: clean up %s: %w", sku, err)
	}
	if err := db.Exec(`DELETE FROM stock_items WHERE sku = ?`, sku).Error; err != nil {
		return fmt.Errorf("loadtest: clean up %s: %w", sku, err)
	}
	return nil
}

// Requests returns how many requests the plan sends per strategy, for a
// progress bar.
func (p Plan) Requests() int {
	n := p.Burst.Buyers
	if p.Steady.Rate > 0 {
		n += p.Steady.Buyers()
	}
	return n
}

// RunAll runs the strategies one after the other and returns their results,
// with the skipped ones, in the order of app.Strategies. A strategy that
// fails to start or to run has the error in its result; only the end of ctx
// stops the rest.
func (r Runner) RunAll(ctx context.Context, run []app.Strategy, skipped []Result) ([]Result, error) {
	results := skipped
	if r.Progress != nil {
		r.Progress.Begin(len(run) * r.Plan.Requests())
	}
	for _, s := range run {
		if r.Progress != nil {
			r.Progress.Describe(s.Name)
		}
		res, err := r.Run(ctx, s)
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
		if err != nil {
			res.Error = err.Error()
		}
		results = append(results, res)
	}
	order := app.Names()
	slices.SortStableFunc(results, func(a, b Result) int {
		return slices.Index(order, a.Strategy) - slices.Index(order, b.Strategy)
	})
	return results, nil
}
