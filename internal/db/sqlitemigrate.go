package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"

	"github.com/golang-migrate/migrate/v4/database"
)

// sqliteMigrations is golang-migrate's database driver for the shop's
// SQLite file, on the shop's own SQLite driver.
//
// golang-migrate's sqlite driver cannot be linked beside it: both register
// the database/sql driver name "sqlite", and the second registration
// panics. Its lock is also a flag in the process, while the demo starts
// several processes on one file. Here the lock is SQLite's own write lock,
// held by a BEGIN IMMEDIATE transaction on one connection from Lock to
// Unlock: the version checks, the migrations and the version writes of a
// run all happen in it, so that K processes migrate one after another, and
// each reads the version its predecessor committed. Each migration runs in
// a savepoint: one that fails leaves nothing of itself behind, only the
// dirty version that golang-migrate recorded before it.
type sqliteMigrations struct {
	db   *sql.DB
	conn *sql.Conn // held from Lock to Unlock
}

var _ database.Driver = (*sqliteMigrations)(nil)

// The version table, as golang-migrate's own sqlite driver makes it.
const sqliteVersionTable = `CREATE TABLE IF NOT EXISTS schema_migrations (version uint64, dirty bool);
CREATE UNIQUE INDEX IF NOT EXISTS version_unique ON schema_migrations (version);`

func newSQLiteMigrations(ctx context.Context, dsn string) (*sqliteMigrations, error) {
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	if _, err := sdb.ExecContext(ctx, sqliteVersionTable); err != nil {
		sdb.Close()
		return nil, err
	}
	return &sqliteMigrations{db: sdb}, nil
}

func (*sqliteMigrations) Open(string) (database.Driver, error) {
	return nil, errors.New("db: the SQLite migrations open with the shop's DSN")
}

func (d *sqliteMigrations) Close() error {
	if d.conn != nil {
		d.conn.Close() // rolls its transaction back
	}
	return d.db.Close()
}

// Lock waits for SQLite's write lock as long as the DSN's busy_timeout
// says, then reports database.ErrLocked.
func (d *sqliteMigrations) Lock() error {
	if d.conn != nil {
		return database.ErrLocked
	}
	ctx := context.Background()
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		if sqliteRetryable(err) {
			return database.ErrLocked
		}
		return err
	}
	d.conn = conn
	return nil
}

func (d *sqliteMigrations) Unlock() error {
	if d.conn == nil {
		return nil
	}
	_, err := d.conn.ExecContext(context.Background(), "COMMIT")
	d.conn.Close()
	d.conn = nil
	return err
}

func (d *sqliteMigrations) Run(migration io.Reader) error {
	body, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	if err := d.exec("SAVEPOINT migration"); err != nil {
		return err
	}
	if err := d.exec(string(body)); err != nil {
		return errors.Join(&database.Error{OrigErr: err, Err: "migration failed", Query: body}, d.exec("ROLLBACK TO migration"))
	}
	return d.exec("RELEASE migration")
}

func (d *sqliteMigrations) SetVersion(version int, dirty bool) error {
	if err := d.exec("DELETE FROM schema_migrations"); err != nil {
		return err
	}
	if version >= 0 || (version == database.NilVersion && dirty) {
		return d.exec("INSERT INTO schema_migrations (version, dirty) VALUES (?, ?)", version, dirty)
	}
	return nil
}

func (d *sqliteMigrations) Version() (int, bool, error) {
	var q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	} = d.db
	if d.conn != nil {
		q = d.conn
	}
	var v int
	var dirty bool
	err := q.QueryRowContext(context.Background(), "SELECT version, dirty FROM schema_migrations LIMIT 1").Scan(&v, &dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return database.NilVersion, false, nil
	}
	return v, dirty, err
}

// Drop drops every table but SQLite's own.
func (d *sqliteMigrations) Drop() error {
	rows, err := d.db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		names = append(names, n)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, n := range names {
		if _, err := d.db.Exec(fmt.Sprintf("DROP TABLE %q", n)); err != nil {
			return err
		}
	}
	return nil
}

// exec runs a statement in the locked transaction.
func (d *sqliteMigrations) exec(q string, args ...any) error {
	if d.conn == nil {
		return errors.New("db: migrations: not locked")
	}
	_, err := d.conn.ExecContext(context.Background(), q, args...)
	return err
}
