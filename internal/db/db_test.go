package db_test

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
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
		{"", "not set"},
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

// The two schemas must describe the same tables and columns, so that a
// table added for MySQL is not forgotten in SQLite's words.
func TestSchemasMatch(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it reads MySQL's schema")
	mysql := testinfra.ShopDB(t, testinfra.MySQL(t))
	if got, want := columns(t, openSQLite(t)), columns(t, mysql); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("SQLite schema %v\nMySQL schema  %v", got, want)
	}
}

// columns maps each table to its sorted column names.
func columns(t *testing.T, gdb *gorm.DB) map[string][]string {
	t.Helper()
	tables, err := gdb.Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	schema := map[string][]string{}
	for _, table := range tables {
		if strings.HasPrefix(table, "sqlite_") {
			continue // SQLite's own, e.g. the AUTOINCREMENT counters
		}
		cols, err := gdb.Migrator().ColumnTypes(table)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cols {
			schema[table] = append(schema[table], c.Name())
		}
		slices.Sort(schema[table])
	}
	return schema
}

// sqliteStock returns a database with 10 units of "phone".
func sqliteStock(t *testing.T) *gorm.DB {
	t.Helper()
	gdb := openSQLite(t)
	if err := gdb.Exec(`INSERT INTO stock_items (sku, initial, available, updated_at) VALUES ('phone', 10, 10, CURRENT_TIMESTAMP)`).Error; err != nil {
		t.Fatal(err)
	}
	return gdb
}

func available(t *testing.T, tx *gorm.DB) int {
	t.Helper()
	var it struct{ Available int }
	if err := tx.Table("stock_items").Where("sku = ?", "phone").Take(&it).Error; err != nil {
		t.Fatal(err)
	}
	return it.Available
}

func take(t *testing.T, tx *gorm.DB, n int) {
	t.Helper()
	if err := tx.Exec(`UPDATE stock_items SET available = ? WHERE sku = 'phone'`, n).Error; err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
}

// Two transactions that read, then write what they computed, lose an
// update on SQLite as they do on InnoDB: a plain read takes no lock and
// binds the transaction to nothing. (Left to itself, SQLite would fail the
// second write with SQLITE_BUSY_SNAPSHOT.)
func TestSQLiteReadsLikeInnoDB(t *testing.T) {
	t.Parallel()
	gdb := sqliteStock(t)
	t1, t2 := gdb.Begin(), gdb.Begin()
	a, b := available(t, t1), available(t, t2)
	take(t, t1, a-1)
	take(t, t2, b-1)
	if got := available(t, gdb); got != 9 {
		t.Errorf("available %d after two buyers read 10 and wrote 9: want 9, the lost update InnoDB gives", got)
	}
}

// SELECT … FOR UPDATE holds the row until commit: the second reader sees
// the first one's write.
func TestSQLiteForUpdateHoldsTheRow(t *testing.T) {
	t.Parallel()
	gdb := sqliteStock(t)
	forUpdate := func(tx *gorm.DB) *gorm.DB { return tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}) }
	t1 := gdb.Begin()
	a := available(t, forUpdate(t1))
	second := make(chan int, 1)
	go func() {
		var it struct{ Available int }
		t2 := gdb.Begin()
		err := forUpdate(t2).Table("stock_items").Where("sku = ?", "phone").Take(&it).Error
		if err == nil {
			err = t2.Exec(`UPDATE stock_items SET available = ? WHERE sku = 'phone'`, it.Available-1).Error
		}
		if err == nil {
			err = t2.Commit().Error
		}
		if err != nil {
			t.Error(err)
		}
		second <- it.Available
	}()
	time.Sleep(50 * time.Millisecond) // let the second queue behind the first
	take(t, t1, a-1)
	if b := <-second; b != a-1 {
		t.Errorf("the second FOR UPDATE read %d, want %d: the first one's write", b, a-1)
	}
	if got := available(t, gdb); got != 8 {
		t.Errorf("available %d after two locked buyers, want 8", got)
	}
}

// A statement with arguments costs one round trip: the server prepares
// nothing, unless the DSN asks for server-side prepared statements.
func TestMySQLStatementsAreNotPrepared(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it reads MySQL's session counters")
	dsn := testinfra.MySQL(t)
	for _, tc := range []struct {
		dsn      string
		prepared bool
	}{{dsn, false}, {dsn + "&interpolateParams=false", true}} {
		gdb := testinfra.ShopDB(t, tc.dsn)
		sqlDB, err := gdb.DB()
		if err != nil {
			t.Fatal(err)
		}
		sqlDB.SetMaxOpenConns(1) // one session, whose counters we read
		prepares := func() int {
			var name string
			var n int
			if err := gdb.Raw("SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Row().Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := prepares()
		var sku string
		if err := gdb.Raw("SELECT ? AS sku", "a'b").Row().Scan(&sku); err != nil || sku != "a'b" {
			t.Fatalf("%s: SELECT ?: %q, %v", tc.dsn, sku, err)
		}
		if got := prepares() > before; got != tc.prepared {
			t.Errorf("%s: prepared on the server: %v, want %v", tc.dsn, got, tc.prepared)
		}
	}
}

// TestNow: a deadline set from the database's clock compares with it in
// SQL, on MySQL and on SQLite, whose times are text.
func TestNow(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mysql", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			var gdb *gorm.DB
			if name == "mysql" {
				testinfra.NeedsRealServers(t, "its case is MySQL")
				gdb = testinfra.ShopDB(t, testinfra.MySQL(t))
			} else {
				gdb = openSQLite(t)
			}
			now, err := db.Now(gdb)
			if err != nil {
				t.Fatal(err)
			}
			deadline := now.Add(time.Hour)
			if err := gdb.Exec(`INSERT INTO orders (sku, user_id, quantity, status, created_at, expires_at) VALUES ('s', 'u', 1, 'pending', ?, ?)`, now, deadline).Error; err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				at   time.Time
				want int64
			}{{now, 0}, {deadline.Add(-time.Millisecond), 0}, {deadline, 1}, {deadline.Add(time.Minute), 1}} {
				var due int64
				if err := gdb.Raw(`SELECT COUNT(*) FROM orders WHERE expires_at <= ?`, c.at).Row().Scan(&due); err != nil {
					t.Fatal(err)
				}
				if due != c.want {
					t.Errorf("due at %v, deadline %v: %d, want %d", c.at, deadline, due, c.want)
				}
			}
		})
	}
}
