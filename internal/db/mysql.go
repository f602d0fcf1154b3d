package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
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
	// A statement waits for a row lock at most rowLockWait, unless the DSN
	// says otherwise. A request whose deadline passed ends its statement
	// on the server (kill.go), but a KILL that cannot be sent leaves it
	// there: under a storm of retries, each abandoned lock wait (50 s by
	// default) would hold a server thread while the retry opens another,
	// until the server refuses connections ("Too many connections") or
	// stalls on its own latches. A wait cut short is error 1205, which a
	// request retries within its deadline and a job on its next run.
	if _, set := cfg.Params[rowLockWaitParam]; !set {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[rowLockWaitParam] = strconv.Itoa(int(rowLockWait / time.Second))
	}
	// A flash sale is a burst on one row: more connections only queue on
	// its row lock, so a modest pool serves best.
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("db: %w", err)
	}
	gdb, _, err := open(gormmysql.New(gormmysql.Config{DSNConfig: cfg, Conn: sql.OpenDB(newPrimaryOnly(connector))}), 64)
	if err != nil {
		return nil, err
	}
	return ping(ctx, gdb, cfg.Addr)
}

// MySQL error numbers the stores act on.
// rowLockWait bounds a statement's wait for a row lock
// (innodb_lock_wait_timeout, in whole seconds): past the default request
// deadline's half, a wait serves nobody.
const (
	rowLockWaitParam = "innodb_lock_wait_timeout"
	rowLockWait      = 5 * time.Second
)

const (
	errDuplicate       = 1062
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
	// The server takes no writes now. 1290 is a read_only server's answer
	// to a user without READ ONLY ADMIN (MariaDB; SUPER or
	// CONNECTION_ADMIN in MySQL), to a write and to the COMMIT of a
	// transaction that wrote; 1836 is MySQL's innodb_read_only; 1792 a
	// write in a read-only transaction.
	errOptionPreventsStatement = 1290
	errReadOnlyMode            = 1836
	errReadOnlyTransaction     = 1792
)

// IsReadOnly reports whether err means that the MySQL server takes no
// writes now (ErrReadOnly): the statement took no effect.
func IsReadOnly(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case errOptionPreventsStatement, errReadOnlyMode, errReadOnlyTransaction:
			return true
		}
	}
	return errors.Is(err, ErrReadOnly)
}

func mysqlRetryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errDeadlock || me.Number == errLockWaitTimeout)
}

func mysqlDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDuplicate
}
