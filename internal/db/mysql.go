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

// MySQL error numbers the stores act on.
const (
	errDuplicate       = 1062
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
)

func mysqlRetryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errDeadlock || me.Number == errLockWaitTimeout)
}

func mysqlDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDuplicate
}
