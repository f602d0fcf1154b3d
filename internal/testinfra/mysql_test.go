package testinfra_test

import (
	"database/sql"
	"errors"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/testinfra"
)

func TestMySQL(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it checks the databases MySQL creates and drops on the server")
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

// TestStartMariaDB: a private server keeps what it committed through a
// kill (SIGKILL) and a start with the same command line, as a crashed
// MariaDB recovers from its redo log.
func TestStartMariaDB(t *testing.T) {
	t.Parallel()
	m := testinfra.StartMariaDB(t)
	dsn := m.DSN(t)
	db := openMySQL(t, dsn)
	mustExec(t, db, "CREATE TABLE stock (sku VARCHAR(32) PRIMARY KEY, available INT NOT NULL)",
		"INSERT INTO stock VALUES ('phone', 7)")

	pid := m.Pid()
	m.Kill()
	if m.Pid() != 0 {
		t.Fatal("the server still runs after Kill")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d is still there after Kill: %v", pid, err)
	}
	if err := db.PingContext(t.Context()); err == nil {
		t.Fatal("the killed server answered")
	}
	m.Start()
	if m.Pid() == 0 || m.Pid() == pid {
		t.Fatalf("pid %d after Start, %d before Kill: want a new process", m.Pid(), pid)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT available FROM stock WHERE sku = 'phone'").Scan(&n); err != nil || n != 7 {
		t.Errorf("after Kill and Start: available %d, %v; want the committed 7", n, err)
	}
}
