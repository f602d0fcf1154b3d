// Package sale runs flash sales against the shop's strategies, one after
// another, and audits each from the database: `shop demo` (Demo: instances
// in this process, on embedded backends where no server is configured) and
// `shop bench` (Bench: child `shop serve` processes, beside the raw
// ceilings of the servers measured in the same run). The load itself comes
// from package loadtest, the audit from package audit.
package sale

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// anyBuyer returns cfg with buyer authentication and the per-buyer rate
// limit off, whatever the environment says. The demo and the bench measure
// the strategies: their buyers name themselves in the body, with no token,
// and a closed loop sends one buyer's next order as soon as it is answered.
func anyBuyer(cfg config.Config) config.Config {
	cfg.BuyerAuth, cfg.BuyerRate = config.AuthNone, config.Rate{}
	return cfg
}

// validate checks the plan, and that it names only known strategies.
func validate(p loadtest.Plan) error {
	errs := []error{p.Validate()}
	for _, name := range p.Strategies {
		if _, err := strategy.Lookup(name); err != nil {
			errs = append(errs, fmt.Errorf("%v; known: %s", err, strings.Join(strategy.Names(), ", ")))
		}
	}
	return errors.Join(errs...)
}

// selectStrategies returns the strategies of p to run and, as skipped
// results, those for which cannot gives a reason. A strategy named in the
// plan that cannot run is an error; one that would run only because the
// plan names none is skipped with the reason.
func selectStrategies(p loadtest.Plan, cannot func(strategy.Strategy) string) (run []strategy.Strategy, skipped []loadtest.Result, err error) {
	if err := validate(p); err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, s := range strategy.All() {
		named := slices.Contains(p.Strategies, s.Name)
		if len(p.Strategies) > 0 && !named {
			continue
		}
		if why := cannot(s); why != "" {
			if named {
				errs = append(errs, fmt.Errorf("strategy %s %s", s.Name, why))
			}
			skipped = append(skipped, loadtest.Result{Strategy: s.Name, Instances: p.Instances, Skipped: why})
			continue
		}
		run = append(run, s)
	}
	return run, skipped, errors.Join(errs...)
}

// Fleet is the running instances of one strategy.
type Fleet struct {
	loadtest.Shop
	// PIDs are the instances' processes, when they run as processes of
	// their own.
	PIDs []int
	// Stop stops the instances and returns what each used, where known.
	Stop func() ([]loadtest.Usage, error)
}

// Launcher starts instances of the shop running strategy.
type Launcher func(ctx context.Context, strategy string, instances int) (Fleet, error)

// Progress hears of a run as it goes: the progress bar, and the live view.
// Add may be called concurrently.
type Progress interface {
	Begin(total int)      // how many answers the run will wait for; -1: not known
	Describe(what string) // what runs now
	// Start: a phase (burst, steady or closed) of strategy starts, with
	// stock units on sale.
	Start(strategy, phase string, stock int)
	Add(a loadtest.Answer) // one more answer
	// Audited: the phase has ended, and p is what the database says.
	Audited(strategy, phase string, p *loadtest.Phase)
}

// runner runs a plan's strategies one at a time.
type runner struct {
	plan     loadtest.Plan
	launch   Launcher
	db       *gorm.DB                       // the shop's database, for the audit
	note     func(strategy.Strategy) string // how s runs here; may be nil
	progress Progress                       // may be nil
	// settle, if set, waits before each load until what the last one left
	// behind (statements still queued in the database) has drained.
	settle func(context.Context) error
	// meter, if set, returns what reads the CPU time of the processes that
	// serve strategy s, its shops among them, during each load.
	meter func(s strategy.Strategy, shops []int) meter
	// paymentSecret is the shops', with which the load signs payments.
	paymentSecret []byte
	// sku, if set, names the loads' SKUs: <sku>-burst, <sku>-steady and
	// <sku>-closed-<buyers>, each checked fresh (not on sale yet) before
	// it is put on sale. Else each is named after its strategy and a tag
	// of the run's own.
	sku string
	// api audits each load through the shop's API too (Shop.Audit), the
	// phase's API beside the database's audit; with no db, the load's
	// Audit.
	api bool
	// keep leaves each load's rows in the database, where forget deletes
	// them: a deployment's record of the run.
	keep bool
}

// run starts the strategy's fleet, sends the load, audits the database and
// stops the fleet.
func (r runner) run(ctx context.Context, s strategy.Strategy) (res loadtest.Result, err error) {
	res = loadtest.Result{Strategy: s.Name, Instances: r.plan.Instances}
	if r.note != nil {
		res.Note = r.note(s)
	}
	fleet, err := r.launch(ctx, s.Name, r.plan.Instances)
	if err != nil {
		return res, fmt.Errorf("%s: %w", s.Name, err)
	}
	fleet.PaymentSecret = r.paymentSecret
	defer func() {
		usage, stopErr := fleet.Stop()
		res.Usage = usage
		err = errors.Join(err, stopErr)
	}()
	var m meter
	if r.meter != nil {
		m = r.meter(s, fleet.PIDs)
	}
	tag := strings.ToLower(rand.Text()[:6])
	name := func(prefix, phase string) string {
		if r.sku != "" {
			return r.sku + "-" + phase
		}
		return prefix + "-" + s.Name + "-" + tag
	}
	burst := fleet.Shop
	if r.plan.Check || r.plan.HistoryDir != "" {
		burst.History = history.NewRecorder()
	}
	res.Burst, err = r.phase(ctx, burst, s.Name, "burst", name("sale", "burst"), r.plan.Burst.Cart, r.plan.Stock, r.burst(), m)
	if err == nil {
		res.Fairness = r.plan.Burst.Fairness(res.Burst.Stats)
	}
	if err == nil && r.plan.Steady.Rate > 0 {
		res.Steady, err = r.phase(ctx, fleet.Shop, s.Name, "steady", name("steady", "steady"), r.plan.Steady.Cart, r.plan.Steady.Buyers(), r.plan.Steady.Run, m)
	}
	if err == nil && r.plan.Closed.Duration > 0 {
		res.ClosedBuyers, res.ClosedSteps, res.Closed, err = r.closed(ctx, fleet.Shop, s.Name, name("closed", "closed"), 0, m)
	}
	if err == nil && r.plan.Closed.Duration > 0 {
		res.Refusals, err = r.refusals(ctx, fleet.Shop, s.Name, name("refusals", fmt.Sprintf("refusals-%d", res.ClosedBuyers)), res.ClosedBuyers, m)
		if res.Refusals != nil {
			res.ClosedRefusals = loadtest.NewRefusals(res.Refusals, 0)
		}
	}
	if err == nil && r.plan.Closed.Duration > 0 && r.plan.Closed.Cart >= 2 {
		res.ClosedCartBuyers, res.ClosedCartSteps, res.ClosedCart, err = r.closed(ctx, fleet.Shop, s.Name, name("carts", "carts"), r.plan.Closed.Cart, m)
		if single := res.Closed.OrdersPerSecond(); single > 0 {
			res.ClosedCartFraction = res.ClosedCart.OrdersPerSecond() / single
		}
	}
	if err == nil && r.plan.Surge.Rate > 0 {
		surge := fleet.Shop
		if r.plan.Check || r.plan.HistoryDir != "" {
			surge.History = history.NewRecorder()
		}
		res.Surge, err = r.surge(ctx, surge, s.Name, name("surge", "surge"), m)
	}
	return res, err
}

// refusals runs a closed loop of buyers on sku, sold out, for the plan's
// closed loop's duration: every answer should be a refusal, and any other
// is a problem. Its CPU is per refusal.
func (r runner) refusals(ctx context.Context, shop loadtest.Shop, name, sku string, buyers int, m meter) (*loadtest.Phase, error) {
	loop := loadtest.Closed{Buyers: buyers, Duration: r.plan.Closed.Duration}
	p, err := r.phase(ctx, shop, name, "refusals", sku, 0, 0, loop.Run, m)
	if p == nil {
		return nil, err
	}
	if others := p.Requests - p.SoldOut; others > 0 {
		p.Problems = append(p.Problems, fmt.Sprintf("%d of %d answers were not sold-out: %d ordered, %d limit-reached, %d busy, %d failed",
			others, p.Requests, p.Ordered, p.LimitReached, p.Busy, p.Errors))
	}
	p.Problems = prefixed("refusals: ", p.Problems)
	p.CPU = loadtest.PerUnit(p.CPU, p.SoldOut)
	return p, err
}

// surge sends the plan's surge to sku, with stock for a tenth of its
// buyers, and reads the database's connections while it runs.
func (r runner) surge(ctx context.Context, shop loadtest.Shop, name, sku string, m meter) (*loadtest.SurgeResult, error) {
	var conns *loadtest.Connections
	var still time.Duration
	load := func(ctx context.Context, shop loadtest.Shop, sku string, progress func(loadtest.Answer)) (loadtest.Stats, error) {
		stop := watchConnections(ctx, r.db)
		st, err := r.plan.Surge.Run(ctx, shop, sku, progress)
		conns = stop()
		if err == nil {
			still, err = waitStill(ctx, r.db, sku)
		}
		return st, err
	}
	p, err := r.phase(ctx, shop, name, "surge", sku, 0, r.plan.Surge.Units(), load, m)
	if p == nil {
		return nil, err
	}
	p.Problems = prefixed("surge: ", p.Problems)
	res := &loadtest.SurgeResult{Phase: *p, SurgeStats: *p.Stats.Surge}
	res.MySQLConnections, res.AuditAfter = conns, float64(still)/float64(time.Millisecond)
	return res, err
}

// A sale is still once its SKU's stock and orders have not changed for
// stillFor, and the surge's audit waits at most stillAtMost for it.
const stillFor, stillAtMost = time.Second, time.Minute

// waitStill waits until sku's available stock and orders in the database
// stay the same for stillFor, at most stillAtMost, and returns how long
// that took. A surge's last answers are not the end of its sale: a busy
// answer may leave a unit reserved that its shop is still writing (lua
// keeps a reservation whose batch could not commit, and commits it
// later), and an audit that read the sale before would count such units
// as left. With no database it waits for nothing.
func waitStill(ctx context.Context, gdb *gorm.DB, sku string) (time.Duration, error) {
	if gdb == nil {
		return 0, nil
	}
	start := time.Now()
	read := func() (state [2]int64, err error) {
		err = gdb.WithContext(ctx).Raw(`SELECT (SELECT COALESCE(SUM(available), 0) FROM stock_items WHERE sku = ?), (SELECT COUNT(*) FROM orders WHERE sku = ?)`,
			sku, sku).Row().Scan(&state[0], &state[1])
		return state, err
	}
	last, err := read()
	for since := time.Now(); err == nil && time.Since(since) < stillFor && time.Since(start) < stillAtMost; {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		var now [2]int64
		if now, err = read(); now != last {
			last, since = now, time.Now()
		}
	}
	return time.Since(start), err
}

// prefixed returns each problem after prefix, which names its load.
func prefixed(prefix string, problems []string) []string {
	out := make([]string, len(problems))
	for i, p := range problems {
		out[i] = prefix + p
	}
	return out
}

// closed runs the plan's closed loop's search on sku, each order a cart
// of the mix cart or, below 2, one unit of one SKU, and returns its best
// step's buyers and load, and every step.
func (r runner) closed(ctx context.Context, shop loadtest.Shop, name, sku string, cart int, m meter) (int, []loadtest.ClosedStep, *loadtest.Phase, error) {
	phases := make(map[int]*loadtest.Phase)
	load := "closed"
	if cart >= 2 {
		load = "carts"
	}
	best, steps, err := r.plan.Closed.Search(func(buyers int) (loadtest.ClosedStep, bool, error) {
		loop := loadtest.Closed{Buyers: buyers, Duration: r.plan.Closed.Duration, Cart: cart}
		kind := fmt.Sprintf("%s, %d buyers", load, buyers) // a card of its own in the live view
		p, err := r.phase(ctx, shop, name, kind, fmt.Sprintf("%s-%d", sku, buyers), cart, closedStock, loop.Run, m)
		if err != nil {
			return loadtest.ClosedStep{}, false, err
		}
		phases[buyers] = p
		return loadtest.ClosedStep{Buyers: buyers, PerSecond: p.OrdersPerSecond(), P99: p.Latency.P99}, len(p.Problems) == 0, nil
	})
	return best, steps, phases[best], err
}

// closedStock is the stock of a closed loop: more than any loop here sells,
// and the most the admin API takes.
const closedStock = 1_000_000_000

// runAll runs the strategies one after the other and returns their results,
// with the skipped ones, in the registry's order. A strategy that fails to
// start or to run has the error in its result; only the end of ctx stops
// the rest.
func (r runner) runAll(ctx context.Context, run []strategy.Strategy, skipped []loadtest.Result) ([]loadtest.Result, error) {
	results := skipped
	if r.progress != nil {
		r.progress.Begin(max(-1, len(run)*r.plan.Requests()))
	}
	for _, s := range run {
		if r.progress != nil {
			r.progress.Describe(s.Name)
		}
		res, err := r.run(ctx, s)
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
		if err != nil {
			res.Error = err.Error()
		}
		results = append(results, res)
	}
	order := strategy.Names()
	slices.SortStableFunc(results, func(a, b loadtest.Result) int {
		return slices.Index(order, a.Strategy) - slices.Index(order, b.Strategy)
	})
	return results, nil
}
