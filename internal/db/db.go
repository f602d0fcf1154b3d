// Package db opens the shop's database, migrates its schema (versioned SQL
// files, see migrate.go), and classifies driver errors so that the stores
// above can translate them. A MySQL pool keeps connections to the primary
// only: a server that turns read-only leaves it (primary.go). A statement
// whose caller gives up is ended on the server (kill.go).
//
// Two dialects are supported. MySQL (or MariaDB) is the real one. SQLite,
// named by a DSN that starts with "sqlite:", is embedded and needs no
// server, so that `shop demo` runs with nothing but Go. Everything that
// differs between them lives in this package: mysql.go and sqlite.go.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// SQLitePrefix marks a DSN as an SQLite file: "sqlite:/path/to/shop.db".
const SQLitePrefix = "sqlite:"

// Open connects to the database named by dsn and checks that it answers.
// Times are read and written in UTC.
func Open(ctx context.Context, dsn string) (*gorm.DB, error) {
	if path, ok := strings.CutPrefix(dsn, SQLitePrefix); ok {
		return openSQLite(ctx, path)
	}
	return openMySQL(ctx, dsn)
}

// CheckDSN reports what is wrong with dsn, without connecting.
func CheckDSN(dsn string) error {
	if dsn == "" {
		return errors.New("not set: name a MySQL DSN, user:pass@tcp(host:port)/db, or " + SQLitePrefix + "FILE")
	}
	if path, ok := strings.CutPrefix(dsn, SQLitePrefix); ok {
		if path == "" {
			return fmt.Errorf("%s needs a file name, e.g. %s/tmp/shop.db", SQLitePrefix, SQLitePrefix)
		}
		return nil
	}
	return checkMySQL(dsn)
}

// IsSQLite reports whether gdb is an SQLite database.
func IsSQLite(gdb *gorm.DB) bool { return gdb.Dialector.Name() == "sqlite" }

// Close closes the connection pools.
func Close(gdb *gorm.DB) error {
	sqlDB, err := gdb.DB()
	if err != nil {
		return err
	}
	if p, ok := gdb.Config.Plugins[consistentReadsPlugin].(*consistentReads); ok {
		return errors.Join(p.reads.Close(), sqlDB.Close())
	}
	return sqlDB.Close()
}

// Now reads the database's clock, in UTC: the payment window's deadlines
// are set and compared on it, never on an instance's.
func Now(tx *gorm.DB) (time.Time, error) {
	if IsSQLite(tx) {
		var s string
		if err := tx.Raw(`SELECT ` + NowSQL(tx)).Row().Scan(&s); err != nil {
			return time.Time{}, err
		}
		return time.ParseInLocation("2006-01-02 15:04:05.000", s, time.UTC)
	}
	var t time.Time
	err := tx.Raw(`SELECT ` + NowSQL(tx)).Row().Scan(&t)
	return t.UTC(), err
}

// NowSQL is the database's clock, in UTC, as an SQL expression for a
// statement to write.
func NowSQL(tx *gorm.DB) string {
	if IsSQLite(tx) {
		return `strftime('%Y-%m-%d %H:%M:%f', 'now')`
	}
	return `UTC_TIMESTAMP(6)`
}

// IsRetryable reports whether err means the transaction was rolled back for
// contention (a deadlock, a lock-wait timeout, a busy database) and may be
// run again.
func IsRetryable(err error) bool { return mysqlRetryable(err) || sqliteRetryable(err) }

// IsDuplicate reports whether err is a unique-key violation.
func IsDuplicate(err error) bool { return mysqlDuplicate(err) || sqliteDuplicate(err) }

// open opens a GORM database on d with the shop's settings and a pool of
// conns connections.
func open(d gorm.Dialector, conns int) (*gorm.DB, *sql.DB, error) {
	gdb, err := gorm.Open(d, &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, nil, fmt.Errorf("db: %w", err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, nil, fmt.Errorf("db: %w", err)
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	sqlDB.SetConnMaxLifetime(5 * time.Minute)
	return gdb, sqlDB, nil
}

// ping checks that a freshly opened pool answers, and closes it if not.
func ping(ctx context.Context, gdb *gorm.DB, what string) (*gorm.DB, error) {
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("db: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		Close(gdb)
		return nil, fmt.Errorf("db: %s: %w", what, err)
	}
	return gdb, nil
}
