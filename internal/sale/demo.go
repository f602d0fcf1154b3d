package loadtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/alicebob/miniredis/v2"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
)

// Demo runs every strategy in this process against servers that are
// configured, and embeds those that are not: SQLite for the database (a
// file in a temporary directory), miniredis for Redis and for the Redlock
// masters. ZooKeeper cannot be embedded: without a server, the strategies
// that need it are skipped, and the report says so.
type Demo struct {
	Plan    Plan
	MySQL   string   // DSN; empty embeds SQLite
	Redis   string   // address; empty embeds miniredis
	Redlock []string // Redlock masters; empty embeds redlockMasters miniredis
	ZK      []string // ZooKeeper servers; empty skips what needs them
	// Getenv supplies the rest of the shop's configuration (SHOP_*).
	Getenv   config.Getenv
	Progress Progress // may be nil
}

// redlockMasters is how many independent embedded masters Redlock gets.
const redlockMasters = 3

// Run runs the demo. It returns the error of a bad plan before it starts
// anything.
func (d Demo) Run(ctx context.Context) (*Report, error) {
	servers := Servers{"redis": true, "redlock": true, "zookeeper": len(d.ZK) > 0}
	sqlite := d.MySQL == ""
	run, skipped, err := d.Plan.Select(func(s app.Strategy) string {
		if sqlite && s.NotOnSQLite {
			return "cannot run on SQLite: " + s.OnSQLite + "; use --mysql"
		}
		return servers.Missing(s)
	})
	if err != nil {
		return nil, err
	}
	rep := newReport("demo", d.Plan)
	var cleanup []func()
	defer func() {
		for _, c := range cleanup {
			c()
		}
	}()
	env := map[string]string{"SHOP_ZK_ADDRS": strings.Join(d.ZK, ",")}

	dsn := d.MySQL
	if dsn == "" {
		dir, err := os.MkdirTemp("", "stockguard-demo-")
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		dsn = db.SQLitePrefix + filepath.Join(dir, "shop.db")
	}
	env["SHOP_MYSQL_DSN"] = dsn

	embed := func() (string, error) {
		m, err := miniredis.Run()
		if err != nil {
			return "", fmt.Errorf("loadtest: miniredis: %w", err)
		}
		cleanup = append(cleanup, m.Close)
		return m.Addr(), nil
	}
	redisNote, redlockNote := "Redis at "+d.Redis, "masters at "+strings.Join(d.Redlock, ",")
	if d.Redis == "" {
		if d.Redis, err = embed(); err != nil {
			return nil, err
		}
		redisNote = "miniredis (embedded)"
	}
	if len(d.Redlock) == 0 {
		for range redlockMasters {
			addr, err := embed()
			if err != nil {
				return nil, err
			}
			d.Redlock = append(d.Redlock, addr)
		}
		redlockNote = fmt.Sprintf("%d miniredis masters (embedded)", redlockMasters)
	}
	env["SHOP_REDIS_ADDR"] = d.Redis
	env["SHOP_REDLOCK_ADDRS"] = strings.Join(d.Redlock, ",")

	gdb, dbNote, err := openDB(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close(gdb)
	zkNote := "none: strategies that need it are skipped"
	if len(d.ZK) > 0 {
		zkNote = strings.Join(d.ZK, ",")
	}
	rep.Backends = []Backend{{"database", dbNote}, {"redis", redisNote}, {"redlock", redlockNote}, {"zookeeper", zkNote}}

	getenv := func(key string) string {
		if v, ok := env[key]; ok {
			return v
		}
		if d.Getenv != nil {
			return d.Getenv(key)
		}
		return ""
	}
	r := Runner{Plan: d.Plan, Launch: InProcess(getenv), DB: gdb, Progress: d.Progress}
	if sqlite {
		r.Note = func(s app.Strategy) string { return s.OnSQLite }
	}
	rep.Results, err = r.RunAll(ctx, run, skipped)
	rep.finish()
	return rep, err
}
