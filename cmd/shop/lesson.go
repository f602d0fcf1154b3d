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
	dir := fs.String("dir", "", "where a lesson writes files to open afterwards (linearizability's history and its page); default a new temporary directory")
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
	env.Dir = *dir
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
	if err := lessonRedis(env, cfg, &closers); err != nil {
		return nil, nil, err
	}
	if err := lessonDB(ctx, env, cfg, &closers); err != nil {
		return nil, nil, err
	}
	// What the lessons left in a real Redis goes; on MySQL their SKUs
	// stay, named by the prefix, for a look afterwards.
	if cfg.RedisAddr != "" {
		closers = append(closers, func() { deleteKeys(context.Background(), env.Redis, env.Prefix) })
	}
	for _, m := range env.Masters[:len(cfg.RedlockAddrs)] {
		closers = append(closers, func() { deleteKeys(context.Background(), m.Client, env.Prefix) })
	}
	return env, closeEnv, nil
}

// lessonRedis fills env's Redis and Redlock masters: the servers cfg names,
// else embedded ones, whose clocks Advance then fast-forwards. What it
// opens is closed by closers, last first.
func lessonRedis(env *lesson.Env, cfg config.Config, closers *[]func()) error {
	// Embedded servers are fast-forwarded; real ones are waited for.
	var embedded []*miniredis.Miniredis
	embed := func() (*miniredis.Miniredis, error) {
		m, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("lesson: miniredis: %w", err)
		}
		*closers = append(*closers, m.Close)
		embedded = append(embedded, m)
		return m, nil
	}
	client := func(addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr})
		*closers = append(*closers, func() { c.Close() })
		return c
	}
	addr := cfg.RedisAddr
	if addr == "" {
		m, err := embed()
		if err != nil {
			return err
		}
		addr = m.Addr()
	}
	env.Redis = client(addr)
	if len(cfg.RedlockAddrs) == 0 {
		for range 3 {
			m, err := embed()
			if err != nil {
				return err
			}
			// An embedded master restarts without its data.
			env.Masters = append(env.Masters, lesson.Master{Client: client(m.Addr()),
				RestartEmpty: func(context.Context) error { m.FlushAll(); return nil }})
		}
	}
	for _, a := range cfg.RedlockAddrs {
		c := client(a)
		// A real master is not restarted: the lesson's keys on it go, as a
		// restart without persistence would lose them.
		env.Masters = append(env.Masters, lesson.Master{Client: c,
			RestartEmpty: func(ctx context.Context) error { return deleteKeys(ctx, c, env.Prefix) }})
	}
	if cfg.RedisAddr == "" && len(cfg.RedlockAddrs) == 0 {
		env.Advance = func(d time.Duration) {
			for _, m := range embedded {
				m.FastForward(d)
			}
		}
	}
	return nil
}

// lessonDB opens and migrates env's database: the one cfg names, else
// SQLite in a temporary directory.
func lessonDB(ctx context.Context, env *lesson.Env, cfg config.Config, closers *[]func()) (err error) {
	dsn := cfg.MySQLDSN
	if dsn == "" {
		dir, err := os.MkdirTemp("", "stockguard-lesson-")
		if err != nil {
			return err
		}
		*closers = append(*closers, func() { os.RemoveAll(dir) })
		dsn = db.SQLitePrefix + filepath.Join(dir, "shop.db")
	}
	if env.DB, err = db.Open(ctx, dsn); err != nil {
		return err
	}
	*closers = append(*closers, func() { db.Close(env.DB) })
	env.MySQL = !strings.HasPrefix(dsn, db.SQLitePrefix)
	return db.Migrate(ctx, env.DB)
}

// deleteKeys deletes the keys under prefix.
func deleteKeys(ctx context.Context, c *redis.Client, prefix string) error {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := c.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}
