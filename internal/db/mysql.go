package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
)

func checkMySQL(dsn string) error {
	_, err := mysql.ParseDSN(dsn)
	return err
}

func openMySQL(ctx context.Context, dsn string) (*gorm.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("db: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// A statement with arguments is one round trip, not three (prepare,
	// execute, close): the driver quotes the arguments itself, as it does
	// safely for the shop's utf8mb4 and ascii columns. A DSN that sets
	// interpolateParams keeps its choice.
	if !strings.Contains(dsn, "interpolateParams=") {
		cfg.InterpolateParams = true
	}
	// A flash sale is a burst on one row: more connections only queue on
	// its row lock, so a modest pool serves best.
	gdb, _, err := open(gormmysql.New(gormmysql.Config{DSN: cfg.FormatDSN()}), 64)
	if err != nil {
		return nil, err
	}
	return ping(ctx, gdb, cfg.Addr)
}

// mysqlSchema is idempotent and runs on MySQL 8 and MariaDB 10.11. Both
// enforce the CHECK; the fence column only grows (see internal/lock).
var mysqlSchema = []string{
	`CREATE TABLE IF NOT EXISTS stock_items (
		sku        VARCHAR(64) NOT NULL PRIMARY KEY,
		initial    INT NOT NULL,
		available  INT NOT NULL,
		version    BIGINT NOT NULL DEFAULT 0,
		fence      BIGINT NOT NULL DEFAULT 0,
		updated_at DATETIME(6) NOT NULL,
		CONSTRAINT stock_items_available_nonnegative CHECK (available >= 0)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS orders (
		id              BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		sku             VARCHAR(64) NOT NULL,
		user_id         VARCHAR(64) NOT NULL,
		quantity        INT NOT NULL,
		status          VARCHAR(16) NOT NULL,
		idempotency_key VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
		created_at      DATETIME(6) NOT NULL,
		refunded_at     DATETIME(6) NULL,
		refund_key      VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
		UNIQUE KEY orders_user_key (user_id, idempotency_key),
		KEY orders_user_sku (user_id, sku, id),
		KEY orders_sku (sku)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// The payment window's columns, added to an orders table made before
	// them too (see mysqlColumns).
	// A payment callback under its payment_id, the key of its replay: the
	// one that paid its order, or one kept as orphaned (its order expired,
	// or another payment paid it first) so that the money can go back.
	`CREATE TABLE IF NOT EXISTS payments (
		payment_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
		order_id   BIGINT NOT NULL,
		status     VARCHAR(16) NOT NULL,
		reason     VARCHAR(32) NULL,
		created_at DATETIME(6) NOT NULL,
		KEY payments_order (order_id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// The transactional outbox: an event per order transition, written in
	// the transaction that makes it, published by the relay job and then
	// marked. The index finds what is left to publish, in id order.
	`CREATE TABLE IF NOT EXISTS order_events (
		id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		order_id     BIGINT NOT NULL,
		type         VARCHAR(16) NOT NULL,
		payload      TEXT NOT NULL,
		created_at   DATETIME(6) NOT NULL,
		published_at DATETIME(6) NULL,
		KEY order_events_unpublished (published_at, id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// The fence of each job that runs on one instance at a time and
	// writes the database: a run whose token is below it writes nothing.
	`CREATE TABLE IF NOT EXISTS job_fences (
		name  VARCHAR(64) NOT NULL PRIMARY KEY,
		token BIGINT NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// One row per user and SKU with the units of their live orders: the
	// per-user limit is checked on it inside the order transaction, under
	// its row lock.
	`CREATE TABLE IF NOT EXISTS user_purchases (
		user_id VARCHAR(64) NOT NULL,
		sku     VARCHAR(64) NOT NULL,
		units   INT NOT NULL,
		PRIMARY KEY (user_id, sku),
		KEY user_purchases_sku (sku)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// The sale epoch of the lua strategy: the Redis state of a SKU built
	// from its stock carries it, and one whose epoch differs, or that is
	// missing, is rebuilt before it sells. Epochs only grow.
	`CREATE TABLE IF NOT EXISTS stock_epochs (
		sku   VARCHAR(64) NOT NULL PRIMARY KEY,
		epoch BIGINT NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// The dbtable lock (internal/lock): a row per held lock. The token is
	// the fencing token; AUTO_INCREMENT never repeats one, even after a
	// restart (MySQL 8, MariaDB 10.2.4 and later).
	`CREATE TABLE IF NOT EXISTS locks (
		token      BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		name       VARCHAR(191) NOT NULL,
		owner      VARCHAR(64) CHARACTER SET ascii NOT NULL,
		expires_at DATETIME(6) NOT NULL,
		UNIQUE KEY locks_name (name)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
}

// mysqlColumns are the columns and keys that a table made by an earlier
// version lacks, added by Migrate where they are missing.
var mysqlColumns = []column{
	{"orders", "expires_at", "DATETIME(6) NULL"},
	{"orders", "paid_at", "DATETIME(6) NULL"},
	{"orders", "payment_id", "VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL"},
	{"orders", "cancelled_at", "DATETIME(6) NULL"},
	{"orders", "cancel_key", "VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL"},
	{"orders", "KEY orders_expiry", "(status, expires_at)"},
	// Carts: every line of an order is a row. The first line's row, the
	// head, is the order: it counts the lines (line_count). Every other
	// line's row points to it (cart_id), with a line_count of 0. See
	// docs/orders.md#carts.
	{"orders", "cart_id", "BIGINT NULL"},
	{"orders", "line_count", "SMALLINT NOT NULL DEFAULT 1"},
	{"orders", "KEY orders_cart", "(cart_id)"},
	// The traceparent of the request that made an order event, which the
	// relay passes on with it (docs/operations.md#tracing).
	// moved to migration 10 when versioned migrations land
	{"order_events", "traceparent", "VARCHAR(55) CHARACTER SET ascii COLLATE ascii_bin NULL"},
}

// MySQL error numbers the stores act on.
const (
	errDupColumn       = 1060 // a column added by another instance's Migrate
	errDupKeyName      = 1061
	errDuplicate       = 1062
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
)

func mysqlRetryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errDeadlock || me.Number == errLockWaitTimeout)
}

func mysqlDuplicateColumn(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errDupColumn || me.Number == errDupKeyName)
}

func mysqlDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDuplicate
}
