package sale

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// Bench runs every strategy as child shop processes against real servers,
// after the ceilings, measured in the same run: what the HTTP stack alone,
// the database, Redis and each lock can do on this machine. Each strategy
// is shown as a fraction of its own ceiling, which the registry names.
type Bench struct {
	Plan loadtest.Plan
	// Config is the shop's configuration, as config.Flags reads it for
	// bench; the children get it as SHOP_* variables. It must name MySQL
	// and Redis.
	Config   config.Config
	Bin      string        // the shop binary, run as `Bin serve` and `Bin echo`
	Baseline time.Duration // how long each ceiling loops; 0 skips them
	Progress Progress      // may be nil
}

// Run runs the bench. It returns the error of a bad plan before it starts
// anything.
func (b Bench) Run(ctx context.Context) (_ *loadtest.Report, err error) {
	cfg := withCarts(anyBuyer(b.Config), b.Plan)
	var missing []error
	if cfg.MySQLDSN == "" {
		missing = append(missing, errors.New("bench needs a MySQL server: --mysql or SHOP_MYSQL_DSN"))
	}
	if cfg.RedisAddr == "" {
		missing = append(missing, errors.New("bench needs a Redis server, where the shop keeps Idempotency-Keys: --redis or SHOP_REDIS_ADDR"))
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	run, skipped, err := selectStrategies(b.Plan, func(s strategy.Strategy) string { return s.Missing(cfg) })
	if err != nil {
		return nil, err
	}
	rep := loadtest.NewReport("bench", b.Plan)
	gdb, dbNote, err := openDB(ctx, cfg.MySQLDSN, true)
	if err != nil {
		return nil, err
	}
	// The ceilings and the children keep their Redis keys under a prefix
	// of this run's own, deleted after it: a bench's buyers leave millions
	// of Idempotency-Keys, each kept a day.
	prefix := "bench-" + strings.ToLower(rand.Text()[:8]) + ":"
	cfg.RedisPrefix += prefix
	b.Config.RedisPrefix += prefix
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		err = errors.Join(err, forgetKeys(ctx, cfg))
	}()
	defer db.Close(gdb)
	rep.Backends = []loadtest.Backend{{Role: "database", What: dbNote}, {Role: "redis", What: cfg.RedisAddr},
		{Role: "redlock", What: cmp.Or(strings.Join(cfg.RedlockAddrs, ","), "none")},
		{Role: "zookeeper", What: cmp.Or(strings.Join(cfg.ZKAddrs, ","), "none")},
		{Role: "etcd", What: cmp.Or(strings.Join(cfg.EtcdAddrs, ","), "none")},
		{Role: "shop", What: "child processes: " + b.Bin + " serve"}}

	var echo echoLoops
	if b.Baseline > 0 {
		if rep.Baselines, echo, err = b.ceilings(ctx, gdb, run); err != nil {
			return nil, err
		}
	}

	r := runner{plan: b.Plan, launch: processes(b.Bin, cfg.Environ()), db: gdb, progress: b.Progress, paymentSecret: []byte(cfg.PaymentSecret),
		settle: func(ctx context.Context) error { return settle(ctx, gdb) },
		meter:  func(s strategy.Strategy, shops []int) meter { return newMeter(shops, servers(cfg, s)) }}
	rep.Results, err = r.runAll(ctx, run, skipped)
	if err == nil && echo != nil {
		err = b.compareRefusals(ctx, rep, echo, echoes(b.Bin))
	}
	fractions(rep)
	rep.Finish()
	return rep, err
}

// fractions sets each result's throughput as a fraction of its own
// ceiling and of echo's, and its CPU per order as a multiple of echo's,
// where the ceilings were measured.
func fractions(rep *loadtest.Report) {
	ceiling := func(c strategy.Ceiling) (string, float64) {
		j := slices.IndexFunc(rep.Baselines, func(b loadtest.BaselineResult) bool { return b.Key == string(c) })
		if j < 0 || rep.Baselines[j].Throughput <= 0 {
			return "", math.Inf(1) // not measured: no fraction
		}
		return rep.Baselines[j].Key, rep.Baselines[j].Throughput
	}
	_, echoClosed := ceiling(strategy.HTTPEcho)
	_, echoBurst := ceiling(strategy.HTTPEchoBurst)
	echoCPU := 0.0
	if j := slices.IndexFunc(rep.Baselines, func(b loadtest.BaselineResult) bool { return b.Key == string(strategy.HTTPEcho) }); j >= 0 {
		echoCPU = loadtest.CPUPerOrder(rep.Baselines[j].CPU)
	}
	for i, res := range rep.Results {
		s, _ := strategy.Lookup(res.Strategy)
		r := &rep.Results[i]
		var own float64
		r.Baseline, own = ceiling(s.Ceiling)
		if res.Burst != nil {
			r.Fraction, r.EchoFraction = res.Burst.Throughput/own, res.Burst.Throughput/echoBurst
		}
		r.ClosedFraction, r.ClosedEchoFraction = res.Closed.OrdersPerSecond()/own, res.Closed.OrdersPerSecond()/echoClosed
		if res.Closed != nil && echoCPU > 0 {
			r.ClosedCPUOfEcho = loadtest.CPUPerOrder(res.Closed.CPU) / echoCPU
		}
	}
}

// forgetKeys deletes every key under cfg's Redis prefix, on every master.
func forgetKeys(ctx context.Context, cfg config.Config) error {
	rdb := backend.NewRedis(backend.RedisOptions(cfg))
	defer rdb.Close()
	forget := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, cfg.RedisPrefix+"*", 1000).Iterator()
		pipe := c.Pipeline()
		for iter.Next(ctx) {
			pipe.Unlink(ctx, iter.Val()) // one key each: a cluster's keys span slots
			if pipe.Len() == 1000 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		_, err := pipe.Exec(ctx)
		return errors.Join(iter.Err(), err)
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, forget)
	}
	return forget(ctx, rdb.(*redis.Client))
}

// echoLoops is http-echo's closed loops, by buyers: its rate in each.
type echoLoops map[int]float64

// echoLoop is the closed loop of http-echo with buyers: with --closed, the
// strategies' closed loop's duration, so that a strategy and echo compare
// loops of the same buyers, client and length; without, Baseline.
func (b Bench) echoLoop(buyers int) loadtest.Closed {
	return loadtest.Closed{Buyers: buyers, Duration: cmp.Or(b.Plan.Closed.Duration, b.Baseline)}
}

// compareRefusals gives each strategy's refusals their rate over
// http-echo's in a closed loop of the same buyers, and runs on a fleet of
// launch the loops of echo that its search did not, which the http-echo
// baseline then lists with its own steps.
func (b Bench) compareRefusals(ctx context.Context, rep *loadtest.Report, echo echoLoops, launch Launcher) error {
	var missing []int
	for _, r := range rep.Results {
		if _, ok := echo[r.ClosedBuyers]; r.Refusals != nil && !ok && !slices.Contains(missing, r.ClosedBuyers) {
			missing = append(missing, r.ClosedBuyers)
		}
	}
	if len(missing) > 0 {
		b.describe(string(strategy.HTTPEcho) + " for the refusals")
		fleet, err := launch(ctx, "", b.Plan.Instances)
		if err != nil {
			return err
		}
		for _, buyers := range missing {
			st, err := b.echoLoop(buyers).Run(ctx, fleet.Shop, "echo", nil)
			if err != nil {
				fleet.Stop()
				return err
			}
			echo[buyers] = st.Throughput
		}
		if _, err := fleet.Stop(); err != nil {
			return err
		}
		if j := slices.IndexFunc(rep.Baselines, func(b loadtest.BaselineResult) bool { return b.Key == string(strategy.HTTPEcho) }); j >= 0 {
			e := &rep.Baselines[j]
			for _, buyers := range missing {
				e.Steps = append(e.Steps, loadtest.ClosedStep{Buyers: buyers, PerSecond: echo[buyers]})
			}
			slices.SortFunc(e.Steps, func(a, b loadtest.ClosedStep) int { return a.Buyers - b.Buyers })
		}
	}
	for i, r := range rep.Results {
		if r.Refusals != nil {
			rep.Results[i].ClosedRefusals = loadtest.NewRefusals(r.Refusals, echo[r.ClosedBuyers])
		}
	}
	return nil
}

func (b Bench) describe(what string) {
	if b.Progress != nil {
		b.Progress.Describe("ceiling " + what)
	}
}

// ceilings measures, for Baseline each: the shop's HTTP stack alone, as
// many `shop echo` instances as the plan's, under a closed loop; the raw
// loops of the database and Redis; and the serial ceiling of each lock
// strategy that runs. It returns http-echo's closed loops too.
func (b Bench) ceilings(ctx context.Context, gdb *gorm.DB, run []strategy.Strategy) ([]loadtest.BaselineResult, echoLoops, error) {
	b.describe(string(strategy.HTTPEcho))
	fleet, err := echoes(b.Bin)(ctx, "", b.Plan.Instances)
	if err != nil {
		return nil, nil, err
	}
	defer fleet.Stop()
	// The echo loop runs the strategies' search, for its highest rate
	// too, with the single orders' bodies, as their closed loop does, and
	// for as long; the burst below has their burst's cart mix.
	loop := b.echoLoop(echoBuyers)
	if b.Plan.Closed.Duration > 0 {
		loop.Buyers, loop.MaxBuyers, loop.P99 = b.Plan.Closed.Buyers, b.Plan.Closed.MaxBuyers, b.Plan.Closed.P99
	}
	loops := make(map[int]loadtest.Stats)
	echo := make(echoLoops)
	cpu := make(map[int][]loadtest.ClassCPU)
	m := newMeter(fleet.PIDs, nil)
	buyers, steps, err := loop.Search(func(buyers int) (loadtest.ClosedStep, bool, error) {
		before := m.read()
		st, err := b.echoLoop(buyers).Run(ctx, fleet.Shop, "echo", nil)
		loops[buyers], cpu[buyers], echo[buyers] = st, m.perOrder(before, m.read(), st.Ordered), st.Throughput
		return loadtest.ClosedStep{Buyers: buyers, PerSecond: st.Throughput, P99: st.Latency.P99}, st.Errors == 0, err
	})
	if err != nil {
		return nil, nil, err
	}
	closed := loops[buyers]
	// A burst opens a connection per buyer, which costs more than the
	// loop's kept connections: the same burst as the strategies get, at
	// its fastest of a few, bounds their bursts.
	var burst loadtest.Stats
	for range echoBursts {
		st, err := b.Plan.Burst.Run(ctx, fleet.Shop, "echo", nil)
		if err != nil {
			return nil, nil, err
		}
		if st.Throughput > burst.Throughput {
			burst = st
		}
	}
	if _, err := fleet.Stop(); err != nil {
		return nil, nil, err
	}
	what := fmt.Sprintf("the shop's HTTP stack, no backends: %d 'shop echo' processes", b.Plan.Instances)
	results := []loadtest.BaselineResult{
		{Key: string(strategy.HTTPEcho), Workers: buyers, Stats: closed, CPU: cpu[buyers], Steps: steps, Name: what + ", a closed loop"},
		{Key: string(strategy.HTTPEchoBurst), Workers: b.Plan.Burst.Buyers, Stats: burst, Name: what + fmt.Sprintf(", the burst, fastest of %d", echoBursts)},
	}

	var locks []strategy.Strategy
	for _, s := range run {
		if s.Lock != nil {
			locks = append(locks, s)
		}
	}
	probes, closeProbes, err := ceilings(ctx, gdb, b.Config, locks)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range probes {
		b.describe(string(p.Key))
		results = append(results, p.measure(ctx, b.Baseline))
	}
	return results, echo, errors.Join(ctx.Err(), closeProbes())
}

// echoBuyers is how many buyers loop against http-echo when the plan has
// no closed loop of its own, and echoBursts how many bursts it gets.
const echoBuyers, echoBursts = 64, 3
