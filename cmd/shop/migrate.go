package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
)

const migrateUsage = `usage: shop migrate up | down N | status | force V [flags]

  up        apply every migration the database lacks (adopting a database
            made before versioned migrations at version 1)
  down N    roll the last N migrations back
  status    print the schema's version and this release's migrations
  force V   record version V, clean, and run nothing: after a failed
            migration was repaired by hand (-1: no version)

The database is serve's: SHOP_MYSQL_DSN or --mysql. See docs/operations.md.

`

// migrate runs a migration command on serve's database.
func migrate(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", migrateUsage, stderr)
	read := config.Flags(fs, getenv, nil, config.ForDB)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	run, err := migration(pos)
	if err != nil {
		usageLine(stderr, migrateUsage)
		return err
	}
	cfg, err := read()
	if err != nil {
		return err
	}
	if err := db.CheckDSN(cfg.MySQLDSN); err != nil {
		return config.AsGiven(fs, fmt.Errorf("SHOP_MYSQL_DSN: %w", err))
	}
	gdb, err := openDB(ctx, cfg.MySQLDSN)
	if err != nil {
		return err
	}
	defer db.Close(gdb)
	if err := run(ctx, gdb); err != nil {
		return err
	}
	st, err := db.ReadStatus(ctx, gdb)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(stdout, st)
	return err
}

// migration parses the command's words into what it runs.
func migration(pos []string) (func(context.Context, *gorm.DB) error, error) {
	if len(pos) == 0 {
		return nil, errors.New("shop migrate needs a command: up, down N, status or force V")
	}
	cmd, rest := pos[0], pos[1:]
	want := map[string]int{"up": 0, "status": 0, "down": 1, "force": 1}
	n, ok := want[cmd]
	if !ok {
		return nil, fmt.Errorf("unknown migrate command %q", cmd)
	}
	if len(rest) != n {
		return nil, fmt.Errorf("shop migrate %s takes %d argument(s), got %d", cmd, n, len(rest))
	}
	var v int
	if n == 1 {
		var err error
		if v, err = strconv.Atoi(rest[0]); err != nil {
			return nil, fmt.Errorf("shop migrate %s: %q is not a whole number", cmd, rest[0])
		}
	}
	switch cmd {
	case "up":
		return db.Migrate, nil
	case "down":
		return func(ctx context.Context, gdb *gorm.DB) error { return db.MigrateDown(ctx, gdb, v) }, nil
	case "force":
		return func(ctx context.Context, gdb *gorm.DB) error { return db.MigrateForce(ctx, gdb, v) }, nil
	}
	return func(context.Context, *gorm.DB) error { return nil }, nil
}

// openDB opens the database named by dsn. A MySQL server without that
// database is told to create it: the shop makes its tables, not the
// database.
func openDB(ctx context.Context, dsn string) (*gorm.DB, error) {
	gdb, err := db.Open(ctx, dsn)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1049 {
		name := "shop"
		if c, perr := mysql.ParseDSN(dsn); perr == nil {
			name = c.DBName
		}
		return nil, fmt.Errorf("%w; create it first: CREATE DATABASE `%s` (see docs/quickstart.md)", err, name)
	}
	return gdb, err
}
