package db

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/glebarez/go-sqlite"
	gormsqlite "github.com/glebarez/sqlite"
	"gorm.io/gorm"
)

// openSQLite opens the SQLite file at path, creating it if needed.
//
// SQLite has one writer at a time and no row locks, so the settings serve
// a burst of writers:
//   - WAL lets readers run beside the writer;
//   - busy_timeout makes a writer wait its turn instead of failing;
//   - _txlock=immediate starts every transaction as BEGIN IMMEDIATE: it
//     takes the write lock before its first read. This is how `pessimistic`
//     runs here, as SQLite has no SELECT … FOR UPDATE (GORM drops the
//     clause). A deferred transaction would read first and then fail with
//     SQLITE_BUSY_SNAPSHOT when another writer got in between.
//
// Reads outside a transaction still see whatever was last committed, so a
// strategy that reads and then writes without a guard oversells here as it
// does on MySQL.
func openSQLite(ctx context.Context, path string) (*gorm.DB, error) {
	q := url.Values{
		"_pragma":      {"journal_mode(WAL)", "busy_timeout(10000)", "synchronous(NORMAL)"},
		"_txlock":      {"immediate"},
		"_time_format": {"sqlite"},
	}
	gdb, err := gorm.Open(gormsqlite.Open(path+"?"+q.Encode()), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("db: %w", err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("db: %w", err)
	}
	// Writers queue on one lock: a few connections keep them queueing in
	// the pool, which is fair, rather than in SQLite's sleeping busy loop.
	sqlDB.SetMaxOpenConns(4)
	sqlDB.SetMaxIdleConns(4)
	return ping(ctx, gdb, path)
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
