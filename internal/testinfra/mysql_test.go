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

// TestMySQLPair: a semi-synchronous pair behind its endpoint. A write
// acknowledged while the replica's applier lags survives the primary's
// kill, and the endpoint closes what it carried; after a switchover a
// connection opened before it stays on the old primary, where read_only
// refuses the shop's user (1290), while new ones reach the new primary.
func TestMySQLPair(t *testing.T) {
	t.Parallel()
	p := testinfra.StartMySQLPair(t, true)
	dsn := p.DSN(t)
	db := openMySQL(t, dsn)
	db.SetMaxIdleConns(0) // each statement on a new connection, but those held
	mustExec(t, db, "CREATE TABLE orders (id INT PRIMARY KEY)", "INSERT INTO orders VALUES (1)")
	held := func() *sql.Conn {
		c, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	count := func() (n int) {
		c := held() // a connection of its own, made now
		defer c.Close()
		if err := c.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM orders").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	p.Lag()
	old := held()
	mustExec(t, db, "INSERT INTO orders VALUES (2)")
	killed := p.KillPrimaryAndPromote()
	if n := count(); n != 2 || p.Primary() == killed {
		t.Errorf("after the kill: %d orders on %s (killed %s); want both, the acknowledged one applied from the relay log", n, p.Primary(), killed)
	}
	if err := old.PingContext(t.Context()); err == nil {
		t.Error("a connection through the endpoint survived the failover")
	}

	p.Restore()
	old = held()
	switched := p.Switchover()
	_, err := old.ExecContext(t.Context(), "INSERT INTO orders VALUES (3)")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1290 {
		t.Errorf("a write on the old primary %s after the switchover: %v; want error 1290 (read-only)", switched, err)
	}
	mustExec(t, db, "INSERT INTO orders VALUES (4)")
	if n := count(); n != 3 {
		t.Errorf("after the switchover: %d orders; want 3", n)
	}
	p.Restore()
	mustExec(t, db, "INSERT INTO orders VALUES (5)")
	if n := count(); n != 4 {
		t.Errorf("after Restore: %d orders; want 4", n)
	}
}
