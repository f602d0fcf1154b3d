package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"

	"github.com/glebarez/go-sqlite"
	gormsqlite "github.com/glebarez/sqlite"
	"gorm.io/gorm"
)

// openSQLite opens the SQLite file at path, creating it if needed.
//
// SQLite has one writer at a time, so the settings serve a burst of
// writers: WAL lets readers run beside the writer, and busy_timeout makes a
// writer wait its turn rather than fail.
func openSQLite(ctx context.Context, path string) (*gorm.DB, error) {
	dsn := path + "?" + url.Values{
		"_pragma":      {"journal_mode(WAL)", "busy_timeout(10000)", "synchronous(NORMAL)"},
		"_time_format": {"sqlite"},
	}.Encode()
	// Writers queue on one lock: a few connections keep them queueing in
	// the pool, which is fair, rather than in SQLite's sleeping busy loop.
	gdb, sqlDB, err := open(gormsqlite.Open(dsn), 4)
	if err != nil {
		return nil, err
	}
	reads, err := sql.Open("sqlite", dsn)
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("db: %w", err)
	}
	reads.SetMaxOpenConns(8)
	reads.SetMaxIdleConns(8)
	if err := gdb.Use(&consistentReads{reads: reads}); err != nil {
		Close(gdb)
		reads.Close()
		return nil, fmt.Errorf("db: %w", err)
	}
	return ping(ctx, gdb, path)
}

// consistentReads gives SQLite the reads of MySQL's InnoDB, which the
// strategies were written against: a plain SELECT (Find, Take, First) in a
// transaction reads the last committed rows on a connection of its own,
// and binds nothing, so that a guard that does not hold loses updates here
// as it does on MySQL, rather than being retried by SQLite. SELECT … FOR
// UPDATE takes SQLite's one write lock, as BEGIN IMMEDIATE does. Raw and
// Scan still run in the transaction. It is a GORM plugin, so that Close
// finds the pool of its reads. See docs/demo.md#sqlite-in-place-of-mysql.
type consistentReads struct{ reads *sql.DB }

// consistentReadsPlugin names the plugin in gorm.Config.Plugins.
const consistentReadsPlugin = "db:consistent_reads"

func (*consistentReads) Name() string { return consistentReadsPlugin }

// Initialize registers the callbacks.
func (p *consistentReads) Initialize(gdb *gorm.DB) error {
	const saved = "db:tx"
	err := gdb.Callback().Query().Before("gorm:query").Register("db:consistent_read", func(tx *gorm.DB) {
		if _, inTx := tx.Statement.ConnPool.(gorm.TxCommitter); !inTx || tx.Error != nil {
			return
		}
		if _, forUpdate := tx.Statement.Clauses["FOR"]; forUpdate {
			_, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, "DELETE FROM "+tx.Statement.Quote(tx.Statement.Table)+" WHERE 0")
			tx.AddError(err)
			return
		}
		tx.Statement.Settings.Store(saved, tx.Statement.ConnPool)
		tx.Statement.ConnPool = p.reads
	})
	if err != nil {
		return err
	}
	return gdb.Callback().Query().After("gorm:query").Register("db:consistent_read_end", func(tx *gorm.DB) {
		if pool, ok := tx.Statement.Settings.LoadAndDelete(saved); ok {
			tx.Statement.ConnPool = pool.(gorm.ConnPool)
		}
	})
}

// sqliteSchema is mysqlSchema in SQLite's words: the same tables, columns,
// keys and CHECK.
var sqliteSchema = []string{
	`CREATE TABLE IF NOT EXISTS stock_items (
		sku        TEXT NOT NULL PRIMARY KEY,
		initial    INTEGER NOT NULL,
		available  INTEGER NOT NULL,
		version    INTEGER NOT NULL DEFAULT 0,
		fence      INTEGER NOT NULL DEFAULT 0,
		updated_at DATETIME NOT NULL,
		CONSTRAINT stock_items_available_nonnegative CHECK (available >= 0)
	)`,
	`CREATE TABLE IF NOT EXISTS orders (
		id              INTEGER PRIMARY KEY AUTOINCREMENT,
		sku             TEXT NOT NULL,
		user_id         TEXT NOT NULL,
		quantity        INTEGER NOT NULL,
		status          TEXT NOT NULL,
		idempotency_key TEXT NULL,
		created_at      DATETIME NOT NULL,
		refunded_at     DATETIME NULL,
		refund_key      TEXT NULL,
		CONSTRAINT orders_user_key UNIQUE (user_id, idempotency_key)
	)`,
	`CREATE INDEX IF NOT EXISTS orders_user_sku ON orders (user_id, sku, id)`,
	`CREATE INDEX IF NOT EXISTS orders_sku ON orders (sku)`,
	`CREATE TABLE IF NOT EXISTS user_purchases (
		user_id TEXT NOT NULL,
		sku     TEXT NOT NULL,
		units   INTEGER NOT NULL,
		PRIMARY KEY (user_id, sku)
	)`,
	`CREATE INDEX IF NOT EXISTS user_purchases_sku ON user_purchases (sku)`,
	`CREATE TABLE IF NOT EXISTS stock_epochs (
		sku   TEXT NOT NULL PRIMARY KEY,
		epoch INTEGER NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS locks (
		token      INTEGER PRIMARY KEY AUTOINCREMENT,
		name       TEXT NOT NULL,
		owner      TEXT NOT NULL,
		expires_at DATETIME NOT NULL,
		CONSTRAINT locks_name UNIQUE (name)
	)`,
	`CREATE TABLE IF NOT EXISTS payments (
		payment_id TEXT NOT NULL PRIMARY KEY,
		order_id   INTEGER NOT NULL,
		status     TEXT NOT NULL,
		reason     TEXT NULL,
		created_at DATETIME NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS payments_order ON payments (order_id)`,
	`CREATE TABLE IF NOT EXISTS order_events (
		id           INTEGER PRIMARY KEY AUTOINCREMENT,
		order_id     INTEGER NOT NULL,
		type         TEXT NOT NULL,
		payload      TEXT NOT NULL,
		created_at   DATETIME NOT NULL,
		published_at DATETIME NULL
	)`,
	`CREATE INDEX IF NOT EXISTS order_events_unpublished ON order_events (published_at, id)`,
	`CREATE TABLE IF NOT EXISTS job_fences (
		name  TEXT NOT NULL PRIMARY KEY,
		token INTEGER NOT NULL
	)`,
}

// sqliteColumns are mysqlColumns in SQLite's words.
var sqliteColumns = []column{
	{"orders", "expires_at", "DATETIME NULL"},
	{"orders", "paid_at", "DATETIME NULL"},
	{"orders", "payment_id", "TEXT NULL"},
	{"orders", "cancelled_at", "DATETIME NULL"},
	{"orders", "cancel_key", "TEXT NULL"},
	{"orders", "KEY orders_expiry", "(status, expires_at)"},
	{"orders", "cart_id", "INTEGER NULL"},
	{"orders", "line_count", "INTEGER NOT NULL DEFAULT 1"},
	{"orders", "KEY orders_cart", "(cart_id)"},
	// moved to migration 10 when versioned migrations land
	{"order_events", "traceparent", "TEXT NULL"},
}

// SQLite result codes the stores act on; extended codes carry the primary
// code in their low byte.
const (
	sqliteBusy             = 5
	sqliteLocked           = 6
	sqliteConstraintPK     = 1555
	sqliteConstraintUnique = 2067
)

func sqliteRetryable(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == sqliteBusy || se.Code()&0xff == sqliteLocked)
}

func sqliteDuplicate(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqliteConstraintUnique || se.Code() == sqliteConstraintPK)
}
