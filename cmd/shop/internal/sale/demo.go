package sale

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// Demo runs every strategy in this process against the servers that its
// Config names, and embeds those it leaves empty: SQLite for the database
// (a file in a temporary directory), miniredis for Redis and for the
// Redlock masters. ZooKeeper cannot be embedded: without a server, the
// strategies that need it are skipped, and the report says so.
type Demo struct {
	Plan loadtest.Plan
	// Config is the shop's configuration, as config.Flags reads it for
	// demo: empty server addresses are embedded.
	Config   config.Config
	Progress Progress // may be nil
}

// redlockMasters is how many independent embedded masters Redlock gets.
const redlockMasters = 3

// Run runs the demo. It returns the error of a bad plan before it starts
// anything.
func (d Demo) Run(ctx context.Context) (*loadtest.Report, error) {
	if err := validate(d.Plan); err != nil {
		return nil, err
	}
	cfg := withCarts(anyBuyer(d.Config), d.Plan)
	var cleanup []func()
	defer func() {
		for _, c := range cleanup {
			c()
		}
	}()
	sqlite := cfg.MySQLDSN == ""
	if sqlite {
		dir, err := os.MkdirTemp("", "stockguard-demo-")
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		cfg.MySQLDSN = db.SQLitePrefix + filepath.Join(dir, "shop.db")
	}
	embed := func() (string, error) {
		m, err := miniredis.Run()
		if err != nil {
			return "", fmt.Errorf("sale: miniredis: %w", err)
		}
		stop := expireInRealTime(m)
		cleanup = append(cleanup, func() { stop(); m.Close() })
		return m.Addr(), nil
	}
	var err error
	redisNote, redlockNote := "Redis at "+cfg.RedisAddr, "masters at "+strings.Join(cfg.RedlockAddrs, ",")
	if cfg.RedisAddr == "" {
		if cfg.RedisAddr, err = embed(); err != nil {
			return nil, err
		}
		redisNote = "miniredis (embedded)"
	}
	if len(cfg.RedlockAddrs) == 0 {
		for range redlockMasters {
			addr, err := embed()
			if err != nil {
				return nil, err
			}
			cfg.RedlockAddrs = append(cfg.RedlockAddrs, addr)
		}
		redlockNote = fmt.Sprintf("%d miniredis masters (embedded)", redlockMasters)
	}
	run, skipped, err := selectStrategies(d.Plan, func(s strategy.Strategy) string {
		if sqlite && s.Embedded.Skip != "" {
			return "cannot run on SQLite: " + s.Embedded.Skip + "; use --mysql"
		}
		return s.Missing(cfg)
	})
	if err != nil {
		return nil, err
	}

	rep := loadtest.NewReport("demo", d.Plan)
	gdb, dbNote, err := openDB(ctx, cfg.MySQLDSN, true)
	if err != nil {
		return nil, err
	}
	defer db.Close(gdb)
	const none = "none: strategies that need it are skipped"
	rep.Backends = []loadtest.Backend{{Role: "database", What: dbNote}, {Role: "redis", What: redisNote},
		{Role: "redlock", What: redlockNote}, {Role: "zookeeper", What: cmp.Or(strings.Join(cfg.ZKAddrs, ","), none)},
		{Role: "etcd", What: cmp.Or(strings.Join(cfg.EtcdAddrs, ","), none)}}

	r := runner{plan: d.Plan, launch: inProcess(cfg), db: gdb, progress: d.Progress, paymentSecret: []byte(cfg.PaymentSecret)}
	if sqlite {
		r.note = func(s strategy.Strategy) string { return s.Embedded.Note }
	}
	rep.Results, err = r.runAll(ctx, run, skipped)
	rep.Finish()
	return rep, err
}

// expireInRealTime makes m's keys expire as a real Redis's do. miniredis
// keeps its clock still, for tests, so a lock key whose release was lost
// would otherwise be held for ever, where Redis frees it after its TTL.
func expireInRealTime(m *miniredis.Miniredis) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return func() { close(done) }
}
