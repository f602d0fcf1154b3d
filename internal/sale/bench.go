package loadtest

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/db"
)

// Bench runs every strategy as child shop processes against real servers,
// after the baselines: the raw loops that show what the servers can do on
// this machine, measured in the same run.
type Bench struct {
	Plan     Plan
	Bin      string // the shop binary, run as `Bin serve`
	MySQL    string // DSN; required
	Redis    string // address; required: the shop keeps Idempotency-Keys there
	Redlock  []string
	ZK       []string
	ZKRoot   string        // where the ZooKeeper baseline puts its znodes
	Baseline time.Duration // how long each baseline loops; 0 skips them
	Progress Progress      // may be nil
}

// Run runs the bench. It returns the error of a bad plan before it starts
// anything.
func (b Bench) Run(ctx context.Context) (*Report, error) {
	var missing []error
	if b.MySQL == "" {
		missing = append(missing, errors.New("bench needs a MySQL server: --mysql or SHOP_MYSQL_DSN"))
	}
	if b.Redis == "" {
		missing = append(missing, errors.New("bench needs a Redis server, where the shop keeps Idempotency-Keys: --redis or SHOP_REDIS_ADDR"))
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	servers := Servers{"redis": true, "redlock": len(b.Redlock) > 0, "zookeeper": len(b.ZK) > 0}
	run, skipped, err := b.Plan.Select(servers.Missing)
	if err != nil {
		return nil, err
	}
	rep := newReport("bench", b.Plan)
	gdb, dbNote, err := openDB(ctx, b.MySQL)
	if err != nil {
		return nil, err
	}
	defer db.Close(gdb)
	rep.Backends = []Backend{{"database", dbNote}, {"redis", b.Redis},
		{"redlock", cmp.Or(strings.Join(b.Redlock, ","), "none")}, {"zookeeper", cmp.Or(strings.Join(b.ZK, ","), "none")},
		{"shop", "child processes: " + b.Bin + " serve"}}

	if b.Baseline > 0 {
		probes, closeProbes, err := Probes(ctx, ProbeServers{DB: gdb, Redis: b.Redis, RedisPrefix: "stockguard:", ZK: b.ZK, ZKRoot: b.ZKRoot})
		if err != nil {
			return nil, err
		}
		for _, p := range probes {
			if b.Progress != nil {
				b.Progress.Describe("baseline " + p.Key)
			}
			rep.Baselines = append(rep.Baselines, p.Measure(ctx, b.Baseline))
		}
		if err := errors.Join(ctx.Err(), closeProbes()); err != nil {
			return nil, err
		}
	}

	env := []string{"SHOP_MYSQL_DSN=" + b.MySQL, "SHOP_REDIS_ADDR=" + b.Redis,
		"SHOP_ZK_ADDRS=" + strings.Join(b.ZK, ","), "SHOP_REDLOCK_ADDRS=" + strings.Join(b.Redlock, ",")}
	r := Runner{Plan: b.Plan, Launch: Processes(b.Bin, env), DB: gdb, Progress: b.Progress,
		Settle: func(ctx context.Context) error { return settle(ctx, gdb) }}
	rep.Results, err = r.RunAll(ctx, run, skipped)
	for i, res := range rep.Results {
		s, _ := app.Lookup(res.Strategy)
		if base, ok := baselineOf(s, rep.Baselines); ok && res.Burst != nil && base.Throughput > 0 {
			rep.Results[i].Baseline = base.Key
			rep.Results[i].Fraction = res.Burst.Throughput / base.Throughput
		}
	}
	rep.finish()
	return rep, err
}

// settle waits, up to a minute, until no other statement runs in the
// database. A request that timed out leaves its statement behind in the
// server, still queued on the hot row for up to innodb_lock_wait_timeout;
// the next load must not pay for it.
func settle(ctx context.Context, gdb *gorm.DB) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		var running int
		err := gdb.WithContext(ctx).Raw(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE COMMAND NOT IN ('Sleep', 'Daemon') AND ID <> CONNECTION_ID()`).Row().Scan(&running)
		if err != nil || running == 0 {
			return err
		}
		if !sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			return ctx.Err()
		}
	}
	return nil // waited long enough: measure anyway
}
