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

	if b.Baseline > 0 {
		if rep.Baselines, err = b.ceilings(ctx, gdb, run); err != nil {
			return nil, err
		}
	}

	r := runner{plan: b.Plan, launch: processes(b.Bin, cfg.Environ()), db: gdb, progress: b.Progress, paymentSecret: []byte(cfg.PaymentSecret),
		settle: func(ctx context.Context) error { return settle(ctx, gdb) },
		meter:  func(s strategy.Strategy, shops []int) meter { return newMeter(shops, servers(cfg, s)) }}
	rep.Results, err = r.runAll(ctx, run, skipped)
	ceiling := func(c strategy.Ceiling) (string, float64) {
		j := slices.IndexFunc(rep.Baselines, func(b loadtest.BaselineResult) bool { return b.Key == string(c) })
		if j < 0 || rep.Baselines[j].Throughput <= 0 {
			return "", math.Inf(1) // not measured: no fraction
		}
		return rep.Baselines[j].Key, rep.Baselines[j].Throughput
	}
	_, echo := ceiling(strategy.HTTPEcho)
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
		r.ClosedFraction, r.ClosedEchoFraction = res.Closed.OrdersPerSecond()/own, res.Closed.OrdersPerSecond()/echo
		if res.Closed != nil && echoCPU > 0 {
			r.ClosedCPUOfEcho = loadtest.CPUPerOrder(res.Closed.CPU) / echoCPU
		}
	}
	rep.Finish()
	return rep, err
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

// ceilings measures, for Baseline each: the shop's HTTP stack alone, as
// many `shop echo` instances as the plan's, under a closed loop; the raw
// loops of the database and Redis; and the serial ceiling of each lock
// strategy that runs.
func (b Bench) ceilings(ctx context.Context, gdb *gorm.DB, run []strategy.Strategy) ([]loadtest.BaselineResult, error) {
	describe := func(what string) {
		if b.Progress != nil {
			b.Progress.Describe("ceiling " + what)
		}
	}
	describe(string(strategy.HTTPEcho))
	fleet, err := echoes(b.Bin)(ctx, "", b.Plan.Instances)
	if err != nil {
		return nil, err
	}
	defer fleet.Stop()
	// The echo loop runs the strategies' search, for its highest rate too,
	// with the single orders' bodies, as their closed loop does; the burst
	// below has their burst's cart mix.
	loop := loadtest.Closed{Buyers: echoBuyers, Duration: b.Baseline}
	if b.Plan.Closed.Duration > 0 {
		loop.Buyers, loop.MaxBuyers, loop.P99 = b.Plan.Closed.Buyers, b.Plan.Closed.MaxBuyers, b.Plan.Closed.P99
	}
	loops := make(map[int]loadtest.Stats)
	cpu := make(map[int][]loadtest.ClassCPU)
	m := newMeter(fleet.PIDs, nil)
	buyers, _, err := loop.Search(func(buyers int) (loadtest.ClosedStep, bool, error) {
		before := m.read()
		st, err := loadtest.Closed{Buyers: buyers, Duration: b.Baseline}.Run(ctx, fleet.Shop, "echo", nil)
		loops[buyers], cpu[buyers] = st, m.perOrder(before, m.read(), st.Ordered)
		return loadtest.ClosedStep{Buyers: buyers, PerSecond: st.Throughput, P99: st.Latency.P99}, st.Errors == 0, err
	})
	if err != nil {
		return nil, err
	}
	closed := loops[buyers]
	// A burst opens a connection per buyer, which costs more than the
	// loop's kept connections: the same burst as the strategies get, at
	// its fastest of a few, bounds their bursts.
	var burst loadtest.Stats
	for range echoBursts {
		st, err := b.Plan.Burst.Run(ctx, fleet.Shop, "echo", nil)
		if err != nil {
			return nil, err
		}
		if st.Throughput > burst.Throughput {
			burst = st
		}
	}
	if _, err := fleet.Stop(); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("the shop's HTTP stack, no backends: %d 'shop echo' processes", b.Plan.Instances)
	results := []loadtest.BaselineResult{
		{Key: string(strategy.HTTPEcho), Workers: buyers, Stats: closed, CPU: cpu[buyers], Name: what + ", a closed loop"},
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
		return nil, err
	}
	for _, p := range probes {
		describe(string(p.Key))
		results = append(results, p.measure(ctx, b.Baseline))
	}
	return results, errors.Join(ctx.Err(), closeProbes())
}

// echoBuyers is how many buyers loop against http-echo when the plan has
// no closed loop of its own, and echoBursts how many bursts it gets.
const echoBuyers, echoBursts = 64, 3
