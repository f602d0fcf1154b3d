package db_test

import (
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
)

// openSQLite returns a migrated SQLite database private to the test.
func openSQLite(t *testing.T) *gorm.DB {
	t.Helper()
	gdb, err := db.Open(t.Context(), db.SQLitePrefix+filepath.Join(t.TempDir(), "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(gdb) })
	for range 2 { // Migrate may run again, as each instance runs it
		if err := db.Migrate(t.Context(), gdb); err != nil {
			t.Fatal(err)
		}
	}
	return gdb
}

func TestCheckDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn, err string
	}{
		{"shop:shop@tcp(127.0.0.1:3306)/shop", ""},
		{"sqlite:/tmp/shop.db", ""},
		{"sqlite:", "needs a file name"},
		{"shop:shop@tcp(127.0.0.1:3306", "invalid DSN"},
	} {
		err := db.CheckDSN(tc.dsn)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("CheckDSN(%q) = %v, want an error with %q", tc.dsn, err, tc.err)
		}
	}
}

func TestSQLiteDuplicate(t *testing.T) {
	t.Parallel()
	gdb := openSQLite(t)
	insert := `INSERT INTO orders (sku, user_id, quantity, status, idempotency_key, created_at) VALUES ('phone', 'alice', 1, 'created', 'k1', CURRENT_TIMESTAMP)`
	if err := gdb.Exec(insert).Error; err != nil {
		t.Fatal(err)
	}
	err := gdb.Exec(insert).Error
	if !db.IsDuplicate(err) || db.IsRetryable(err) {
		t.Errorf("second insert under one key: %v; IsDuplicate %t, IsRetryable %t, want true, false", err, db.IsDuplicate(err), db.IsRetryable(err))
	}
}

func TestSQLiteCheck(t *testing.T) {
	t.Parallel()
	gdb := openSQLite(t)
	err := gdb.Exec(`INSERT INTO stock_items (sku, initial, available, updated_at) VALUES ('phone', 1, -1, CURRENT_TIMESTAMP)`).Error
	if err == nil {
		t.Error("negative available was stored; the CHECK should refuse it")
	}
}

// A writer that finds the write lock taken, and may not wait, gets
// SQLITE_BUSY: retryable, like a MySQL lock-wait timeout.
func TestSQLiteBusyIsRetryable(t *testing.T) {
	t.Parallel()
	holder := openSQLite(t)
	sqlDB, err := holder.DB()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	a, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer a.ExecContext(ctx, "ROLLBACK")
	if _, err := b.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	_, err = b.ExecContext(ctx, "BEGIN IMMEDIATE")
	if !db.IsRetryable(err) || db.IsDuplicate(err) {
		t.Errorf("BEGIN IMMEDIATE while another holds the lock: %v; IsRetryable %t, IsDuplicate %t, want true, false", err, db.IsRetryable(err), db.IsDuplicate(err))
	}
}
