package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	gormsqlite "github.com/glebarez/sqlite"
	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
)

// The schema is a numbered list of SQL files per dialect, embedded in the
// binary and applied by golang-migrate under a lock that every instance
// takes: MySQL's GET_LOCK, SQLite's write lock (sqlitemigrate.go). See
// docs/operations.md#upgrading.
//
//go:embed migrations
var migrations embed.FS

// sources holds the migrations of each dialect, by dialect name.
var sources = map[string]fs.FS{
	"mysql":  sub(migrations, "migrations/mysql"),
	"sqlite": sub(migrations, "migrations/sqlite"),
}

func sub(f fs.FS, dir string) fs.FS {
	s, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return s
}

// The ways a schema keeps the shop from starting.
var (
	ErrSchemaBehind  = errors.New("db: schema behind this release")
	ErrSchemaAhead   = errors.New("db: schema ahead of this release")
	ErrSchemaDirty   = errors.New("db: schema dirty")
	ErrSchemaUnknown = errors.New("db: schema not the shop's")
)

// lockWait bounds how long Migrate waits for another instance's migrations.
const lockWait = 5 * time.Minute

// Migrate brings the schema up to the latest version this release knows:
// it adopts a database made before versioned migrations (adopt.go), then
// applies what is missing. Several instances may run it at once; one
// migrates, the others wait for it and then find nothing to do.
func Migrate(ctx context.Context, gdb *gorm.DB) error {
	return migrateUp(ctx, gdb, sources[dialect(gdb)])
}

func migrateUp(ctx context.Context, gdb *gorm.DB, src fs.FS) error {
	versions, err := versionsIn(src)
	if err != nil {
		return err
	}
	return withLock(ctx, gdb, src, func(m *migrate.Migrate, drv database.Driver) error {
		st := Status{Versions: versions}
		if err := settle(ctx, gdb, drv, &st); err != nil {
			return err
		}
		if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return st.explain(err)
		}
		return nil
	})
}

// MigrateDown rolls the last n migrations back.
func MigrateDown(ctx context.Context, gdb *gorm.DB, n int) error {
	if n < 1 {
		return fmt.Errorf("db: migrate down: %d is not a number of migrations, 1 or more", n)
	}
	return withLock(ctx, gdb, sources[dialect(gdb)], func(m *migrate.Migrate, _ database.Driver) error {
		return m.Steps(-n)
	})
}

// MigrateForce records version v, clean, and runs nothing: after a failed
// migration was repaired by hand. -1 records no version; a version this
// release does not have is refused.
func MigrateForce(ctx context.Context, gdb *gorm.DB, v int) error {
	vs, err := Versions(gdb)
	if err != nil {
		return err
	}
	if v != -1 && !slices.Contains(vs, v) {
		return fmt.Errorf("db: migrate force: this release has no version %d: it has %s, or -1 for none", v, list(vs))
	}
	return withLock(ctx, gdb, sources[dialect(gdb)], func(m *migrate.Migrate, _ database.Driver) error {
		return m.Force(v)
	})
}

// withLock runs f with a golang-migrate instance on gdb's database, and
// runs it again, on a new instance, while another instance holds the
// migration lock, until lockWait or ctx ends.
func withLock(ctx context.Context, gdb *gorm.DB, src fs.FS, f func(*migrate.Migrate, database.Driver) error) error {
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	for {
		err := withMigrate(ctx, gdb, src, f)
		if !errors.Is(err, database.ErrLocked) && !errors.Is(err, migrate.ErrLocked) && !errors.Is(err, migrate.ErrLockTimeout) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("db: migrate: waiting for another instance's migrations: %w", errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func withMigrate(ctx context.Context, gdb *gorm.DB, files fs.FS, f func(*migrate.Migrate, database.Driver) error) error {
	name := dialect(gdb)
	src, err := iofs.New(files, ".")
	if err != nil {
		return fmt.Errorf("db: migrations: %w", err)
	}
	drv, err := migrationDriver(ctx, gdb)
	if err != nil {
		src.Close()
		return fmt.Errorf("db: migrate: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, name, drv)
	if err != nil {
		return errors.Join(fmt.Errorf("db: migrate: %w", err), src.Close(), drv.Close())
	}
	defer m.Close()
	if err := f(m, drv); err != nil {
		return fmt.Errorf("db: migrate: %w", err)
	}
	return nil
}

// migrationDriver opens a connection of its own to gdb's database for the
// migrations: on MySQL, one that runs a file of several statements.
func migrationDriver(ctx context.Context, gdb *gorm.DB) (database.Driver, error) {
	switch d := gdb.Dialector.(type) {
	case *gormsqlite.Dialector:
		return newSQLiteMigrations(ctx, d.DSN)
	case *gormmysql.Dialector:
		cfg, err := mysql.ParseDSN(d.DSN)
		if err != nil {
			return nil, err
		}
		cfg.MultiStatements = true
		sdb, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return nil, err
		}
		drv, err := migratemysql.WithInstance(sdb, &migratemysql.Config{})
		if err != nil {
			sdb.Close()
		}
		return drv, err
	}
	return nil, fmt.Errorf("no migrations for the dialect %s", gdb.Dialector.Name())
}

func dialect(gdb *gorm.DB) string {
	if IsSQLite(gdb) {
		return "sqlite"
	}
	return "mysql"
}

// Versions lists the versions of the migrations this release has for
// gdb's dialect, in order. Numbers may have gaps.
func Versions(gdb *gorm.DB) ([]int, error) { return versionsIn(sources[dialect(gdb)]) }

func versionsIn(src fs.FS) ([]int, error) {
	entries, err := fs.ReadDir(src, ".")
	if err != nil {
		return nil, err
	}
	var vs []int
	for _, e := range entries {
		m, err := source.Parse(e.Name())
		if err != nil {
			return nil, fmt.Errorf("db: migration %s: %w", e.Name(), err)
		}
		if m.Direction == source.Up {
			vs = append(vs, int(m.Version))
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs), nil
}

// PrepareSchema readies gdb's schema for the shop: with migrate, it
// migrates up; without, it only checks that nothing is missing, and names
// what is.
func PrepareSchema(ctx context.Context, gdb *gorm.DB, migrate bool) error {
	if migrate {
		return Migrate(ctx, gdb)
	}
	st, err := ReadStatus(ctx, gdb)
	if err != nil {
		return err
	}
	return st.Check()
}
