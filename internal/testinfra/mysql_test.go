package testinfra_test

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/testinfra"
)

func TestMySQL(t *testing.T) {
	t.Parallel()
	var names []string
	t.Run("fresh databases", func(t *testing.T) {
		for range 2 {
			dsn := testinfra.MySQL(t)
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.ParseTime {
				t.Errorf("%s: parseTime is off", dsn)
			}
			db := openMySQL(t, dsn)
			mustExec(t, db, "CREATE TABLE stock (sku VARCHAR(32) PRIMARY KEY, available INT NOT NULL)")
			names = append(names, cfg.DBName)
		}
		if names[0] == names[1] {
			t.Errorf("two calls gave the same database %s", names[0])
		}
	})

	// The subtest's cleanup has run.
	db := openMySQL(t, testinfra.MySQL(t))
	for _, name := range names {
		var n int
		err := db.QueryRowContext(t.Context(),
			"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("database %s still exists after cleanup", name)
		}
	}
}

func openMySQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatalf("%s: %v", dsn, err)
	}
	return db
}

func mustExec(t *testing.T, db *sql.DB, statements ...string) {
	t.Helper()
	for _, s := range statements {
		if _, err := db.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
