package sale

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// Bench runs every strategy as child shop processes against real servers,
// after the ceilings: the raw loops that show what the servers can do on
// this machine, measured in the same run.
type Bench struct {
	Plan loadtest.Plan
	// Config is the shop's configuration, as config.Flags reads it for
	// bench; the children get it as SHOP_* variables. It must name MySQL
	// and Redis.
	Config   config.Config
	Bin      string        // the shop binary, run as `Bin serve`
	ZKRoot   string        // where the ZooKeeper ceiling puts its znodes
	Baseline time.Duration // how long each ceiling loops; 0 skips them
	Progress Progress      // may be nil
}

// Run runs the bench. It returns the error of a bad plan before it starts
// anything.
func (b Bench) Run(ctx context.Context) (*loadtest.Report, error) {
	cfg := b.Config
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
	gdb, dbNote, err := openDB(ctx, cfg.MySQLDSN)
	if err != nil {
		return nil, err
	}
	defer db.Close(gdb)
	rep.Backends = []loadtest.Backend{{Role: "database", What: dbNote}, {Role: "redis", What: cfg.RedisAddr},
		{Role: "redlock", What: cmp.Or(strings.Join(cfg.RedlockAddrs, ","), "none")},
		{Role: "zookeeper", What: cmp.Or(strings.Join(cfg.ZKAddrs, ","), "none")},
		{Role: "shop", What: "child processes: " + b.Bin + " serve"}}

	if b.Baseline > 0 {
		probes, closeProbes, err := ceilings(ctx, probeServers{DB: gdb, Redis: cfg.RedisAddr, RedisPrefix: "stockguard:", ZK: cfg.ZKAddrs, ZKRoot: b.ZKRoot})
		if err != nil {
			return nil, err
		}
		for _, p := range probes {
			if b.Progress != nil {
				b.Progress.Describe("baseline " + string(p.Key))
			}
			rep.Baselines = append(rep.Baselines, p.measure(ctx, b.Baseline))
		}
		if err := errors.Join(ctx.Err(), closeProbes()); err != nil {
			return nil, err
		}
	}

	r := runner{plan: b.Plan, launch: processes(b.Bin, cfg.Environ()), db: gdb, progress: b.Progress,
		settle: func(ctx context.Context) error { return settle(ctx, gdb) }}
	rep.Results, err = r.runAll(ctx, run, skipped)
	for i, res := range rep.Results {
		s, _ := strategy.Lookup(res.Strategy)
		if base, ok := ceilingOf(s, rep.Baselines); ok && res.Burst != nil && base.Throughput > 0 {
			rep.Results[i].Baseline = base.Key
			rep.Results[i].Fraction = res.Burst.Throughput / base.Throughput
		}
	}
	rep.Finish()
	return rep, err
}

// ceilingOf picks, among the measured ceilings, the one that bounds s: the
// slowest of those its registry entry names.
func ceilingOf(s strategy.Strategy, measured []loadtest.BaselineResult) (loadtest.BaselineResult, bool) {
	var best loadtest.BaselineResult
	found := false
	for _, b := range measured {
		if slices.Contains(s.Ceilings, strategy.Ceiling(b.Key)) && (!found || b.Throughput < best.Throughput) {
			best, found = b, true
		}
	}
	return best, found
}
