package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/lesson"
	"github.com/stockguard/shop/internal/strategy"
)

const lessonUsage = `usage: shop lesson [NAME | all] [flags]

Reproduces the failures the seed articles describe, each beside its fix,
with the numbers read back from Redis and the database. Without NAME it
lists the lessons; 'all' runs every one and ends with a summary.

Servers that are not configured are embedded: miniredis for Redis, whose
clock the lessons fast-forward, and SQLite for the database. A lesson that
needs a server nothing can embed says so and is skipped.

`

func lessonCmd(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lesson", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, lessonUsage)
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print the results as JSON")
	configOf := config.Flags(fs, getenv, strategy.Names(), config.ForLoad)
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	lessons := lesson.All()
	switch name {
	case "":
		return listLessons(stdout, lessons)
	case "all":
	default:
		l, ok := lesson.Find(name)
		if !ok {
			names := make([]string, len(lessons))
			for i, l := range lessons {
				names[i] = l.Name
			}
			return fmt.Errorf("no lesson %q; the lessons are: %s, or all", name, strings.Join(names, ", "))
		}
		lessons = []lesson.Lesson{l}
	}
	cfg, err := configOf()
	if err != nil {
		return err
	}
	env, closeEnv, err := lessonEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeEnv()
	var results []lesson.Result
	failed := 0
	for _, l := range lessons {
		r := l.Run(ctx, env)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !*asJSON {
			lesson.Print(stdout, r)
		}
		if r.Skipped == "" && !r.OK() {
			failed++
		}
		results = append(results, r)
	}
	switch {
	case *asJSON && name != "all":
		err = json.NewEncoder(stdout).Encode(results[0])
	case *asJSON:
		err = json.NewEncoder(stdout).Encode(results)
	case name == "all":
		err = lesson.Summary(stdout, results)
	}
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d lesson(s) did not reproduce their failure, or their fix did not hold", failed)
	}
	return err
}

func listLessons(w io.Writer, lessons []lesson.Lesson) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tLESSON\tSEED\tNEEDS\tWHAT THE SEED CLAIMS")
	for _, l := range lessons {
		needs := "-"
		for i, n := range l.Needs {
			if i == 0 {
				needs = ""
			}
			needs += string(n.Server) + " "
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", l.Number, l.Name, l.Seed, strings.TrimSpace(needs), l.Claim)
	}
	fmt.Fprintln(tw, "\nRun one with 'shop lesson NAME', or every one with 'shop lesson all'.")
	return tw.Flush()
}

// lessonEnv opens the servers cfg names and embeds the others.
func lessonEnv(ctx context.Context, cfg config.Config) (env *lesson.Env, closeEnv func(), err error) {
	var closers []func()
	closeEnv = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeEnv()
		}
	}()
	env = &lesson.Env{Prefix: "lesson:" + strings.ToLower(rand.Text()[:8]) + ":", Advance: time.Sleep,
		ZooKeeper: cfg.ZKAddrs, ZooKeeperRoot: "/stockguard/lessons"}
	addr := cfg.RedisAddr
	if addr == "" {
		m, err := miniredis.Run()
		if err != nil {
			return nil, nil, fmt.Errorf("lesson: miniredis: %w", err)
		}
		closers = append(closers, m.Close)
		addr, env.Advance = m.Addr(), m.FastForward
	}
	env.Redis = redis.NewClient(&redis.Options{Addr: addr})
	closers = append(closers, func() { env.Redis.Close() })
	dsn := cfg.MySQLDSN
	if dsn == "" {
		dir, err := os.MkdirTemp("", "stockguard-lesson-")
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { os.RemoveAll(dir) })
		dsn = db.SQLitePrefix + filepath.Join(dir, "shop.db")
	}
	if env.DB, err = db.Open(ctx, dsn); err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { db.Close(env.DB) })
	if err := db.Migrate(ctx, env.DB); err != nil {
		return nil, nil, err
	}
	env.MySQL = !strings.HasPrefix(dsn, db.SQLitePrefix)
	if cfg.RedisAddr != "" {
		// What the lessons left in a shared Redis goes; on MySQL their
		// SKUs stay, named by the prefix, for a look afterwards.
		closers = append(closers, func() { deleteLessonKeys(env) })
	}
	return env, closeEnv, nil
}

func deleteLessonKeys(env *lesson.Env) {
	ctx := context.Background()
	iter := env.Redis.Scan(ctx, 0, env.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		env.Redis.Del(ctx, iter.Val())
	}
}
