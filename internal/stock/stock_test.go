package stock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// open returns the DSN of a fresh database, migrated, with sku "hot"
// holding 5 units.
func open(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	gdb := testinfra.ShopDB(t, dsn)
	if err := stock.Reset(t.Context(), gdb, "hot", 5); err != nil {
		t.Fatal(err)
	}
	return gdb
}

// lockWaitDSN returns the DSN of a fresh MySQL database whose sessions give
// up a row lock wait after one second (MySQL error 1205).
func lockWaitDSN(t *testing.T) string {
	t.Helper()
	testinfra.NeedsRealServers(t, "it waits on MySQL's row locks, which SQLite does not have")
	dsn := testinfra.MySQL(t) + "&innodb_lock_wait_timeout=1"
	var wait int
	if err := testinfra.ShopDB(t, dsn).Raw("SELECT @@innodb_lock_wait_timeout").Scan(&wait).Error; err != nil || wait != 1 {
		t.Fatalf("innodb_lock_wait_timeout = %d (%v), want 1", wait, err)
	}
	return dsn
}

// holdRow locks the stock row in a transaction of its own until release is
// called, as a slow buyer would.
func holdRow(t *testing.T, gdb *gorm.DB) (release func()) {
	t.Helper()
	tx := gdb.Begin()
	if err := tx.Exec("SELECT available FROM stock_items WHERE sku = 'hot' FOR UPDATE").Error; err != nil {
		t.Fatal(err)
	}
	return func() { tx.Rollback() }
}

// guards builds the named strategies through the registry, on the
// database at dsn, opened as gdb, as serve builds them.
func guards(t *testing.T, dsn string, gdb *gorm.DB, names ...string) map[string]stock.Guard {
	t.Helper()
	all := map[string]stock.Guard{}
	for _, name := range names {
		all[name] = strategytest.Guard(t, name, &backend.Backends{DB: gdb}, map[string]string{"SHOP_MYSQL_DSN": dsn})
	}
	return all
}

// TestLockWaitTimeoutRetried: a lock-wait timeout (1205) rolls the
// transaction back and runs it again, so a buyer queued behind a slow one
// still buys once the row is free.
func TestLockWaitTimeoutRetried(t *testing.T) {
	t.Parallel()
	dsn := lockWaitDSN(t)
	gdb := open(t, dsn)
	for name, g := range guards(t, dsn, gdb, "atomic", "pessimistic") {
		t.Run(name, func(t *testing.T) {
			release := holdRow(t, gdb)
			// Longer than the 1s lock wait, so at least one attempt times out.
			timer := time.AfterFunc(2500*time.Millisecond, release)
			defer timer.Stop()
			attempts := 0
			err := g.Adjust(t.Context(), "hot", -1, func(stock.Tx) error { attempts++; return nil })
			if err != nil {
				t.Fatalf("Adjust: %v", err)
			}
			if attempts != 1 {
				t.Errorf("fn ran %d times, want once: only a committed attempt reaches it", attempts)
			}
		})
	}
	if it, err := stock.Get(t.Context(), gdb, "hot"); err != nil || it.Available != 3 {
		t.Errorf("available %d (%v), want 3", it.Available, err)
	}
}

// TestBusyWhenDeadlinePasses: while another transaction holds the row past
// the request's deadline, Adjust gives up with ErrBusy and changes nothing.
func TestBusyWhenDeadlinePasses(t *testing.T) {
	t.Parallel()
	dsn := lockWaitDSN(t)
	gdb := open(t, dsn)
	for name, g := range guards(t, dsn, gdb, "atomic", "pessimistic") {
		t.Run(name, func(t *testing.T) {
			release := holdRow(t, gdb)
			defer release()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			err := g.Adjust(ctx, "hot", -1, func(stock.Tx) error { return nil })
			if !errors.Is(err, stock.ErrBusy) {
				t.Fatalf("Adjust = %v, want ErrBusy", err)
			}
		})
	}
	if it, err := stock.Get(t.Context(), gdb, "hot"); err != nil || it.Available != 5 {
		t.Errorf("available %d (%v), want 5: a busy answer must change nothing", it.Available, err)
	}
}

// TestErrors: unknown SKUs and short stock are told apart under every
// strategy, and fn's own error rolls the change back.
func TestErrors(t *testing.T) {
	t.Parallel()
	dsn := testinfra.MySQL(t)
	gdb := open(t, dsn)
	all := guards(t, dsn, gdb, "none", "atomic", "pessimistic", "optimistic", "local")
	errFn := errors.New("fn failed")
	for name, g := range all {
		t.Run(name, func(t *testing.T) {
			nop := func(stock.Tx) error { return nil }
			if err := g.Adjust(t.Context(), "nope", -1, nop); !errors.Is(err, stock.ErrNotFound) {
				t.Errorf("unknown sku: %v, want ErrNotFound", err)
			}
			if err := g.Adjust(t.Context(), "hot", -6, nop); !errors.Is(err, stock.ErrSoldOut) {
				t.Errorf("6 of 5: %v, want ErrSoldOut", err)
			}
			if err := g.Adjust(t.Context(), "hot", -1, func(stock.Tx) error { return errFn }); !errors.Is(err, errFn) {
				t.Errorf("fn error: %v, want it passed through", err)
			}
		})
	}
	if it, err := stock.Get(t.Context(), gdb, "hot"); err != nil || it.Available != 5 {
		t.Errorf("available %d (%v), want 5", it.Available, err)
	}
}
