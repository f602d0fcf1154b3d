package testinfra

import (
	"context"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// PrivateMySQL is a MariaDB server private to one test, which it may
// kill and start again, with a user of the test's own.
type PrivateMySQL struct {
	*Server
	dsn string // of the test's user, with no database
}

// DSN returns a go-sql-driver DSN, with parseTime=true, for a fresh
// database on the server, created now: the database survives restarts.
func (m *PrivateMySQL) DSN(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(m.dsn)
	if err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	name := randomName("test_")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := execSQL(ctx, m.dsn, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testinfra: MariaDB at %s: %v", m.Addr(), err)
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}

// ShopDSN is DSN for the user "shop", whom the server's read_only binds
// (it lacks READ ONLY ADMIN), as it binds a shop in production: its
// writes are refused while read_only is on. The test's own user, of DSN,
// may set read_only.
func (m *PrivateMySQL) ShopDSN(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(m.DSN(t))
	if err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	cfg.User, cfg.Passwd = "shop", "shop"
	return cfg.FormatDSN()
}

// StartMariaDB starts a MariaDB server private to the test, through
// Debian's mariadb-install-db and mariadbd, on a free loopback port with
// a data dir of its own; it is killed at cleanup.
//
// Its data survives Stop, Kill and Start: a killed server recovers what
// it committed from its redo log, as a crashed one does. Every start runs
// with the same command line.
func StartMariaDB(t testing.TB) *PrivateMySQL {
	t.Helper()
	skipShort(t, "a MariaDB server process of the test's own")
	install := lookPath(t, "mariadb-install-db", "mariadb-server")
	bin := lookPath(t, "mariadbd", "mariadb-server")
	dir := t.TempDir()
	s := newServer(t, "mariadbd", freeAddr(t), dir, 60*time.Second)
	s.data = filepath.Join(dir, "data")
	me, err := user.Current()
	if err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	// The server's root logs in over the Unix socket as whoever runs the
	// test; the test's own user, over TCP, is made at every start. A tmp
	// dir of its own keeps parallel servers' temporary tables apart.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	out, err := exec.Command(install, "--no-defaults", "--user="+me.Username, "--datadir="+s.data, "--tmpdir="+tmp,
		"--auth-root-authentication-method=socket", "--auth-root-socket-user="+me.Username, "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("testinfra: mariadb-install-db: %v\n%s", err, out)
	}
	initFile := filepath.Join(dir, "init.sql")
	// The shop's user is bound by read_only, as in production; the test's
	// is not, and may set it.
	err = os.WriteFile(initFile, []byte("CREATE USER IF NOT EXISTS 'test'@'127.0.0.1' IDENTIFIED BY 'test';\n"+
		"GRANT ALL ON *.* TO 'test'@'127.0.0.1';\n"+
		"CREATE USER IF NOT EXISTS 'shop'@'127.0.0.1' IDENTIFIED BY 'shop';\n"+
		"GRANT ALL ON *.* TO 'shop'@'127.0.0.1';\n"+
		"REVOKE READ ONLY ADMIN ON *.* FROM 'shop'@'127.0.0.1';\n"), 0o600)
	if err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	host, port, _ := net.SplitHostPort(s.addr)
	s.command = func() *exec.Cmd {
		// Small buffers: a test's server holds little. Durability stays the
		// default, every commit flushed, so that a kill loses no commit.
		return exec.Command(bin, "--no-defaults", "--user="+me.Username, "--datadir="+s.data, "--tmpdir="+tmp,
			"--socket="+filepath.Join(dir, "mysqld.sock"), "--bind-address="+host, "--port="+port,
			"--skip-name-resolve", "--character-set-server=utf8mb4", "--max-connections=1000",
			"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--init-file="+initFile)
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.ParseTime = "test", "test", "tcp", s.addr, true
	m := &PrivateMySQL{Server: s, dsn: cfg.FormatDSN()}
	s.ready = func(ctx context.Context) error { return execSQL(ctx, m.dsn, "SELECT 1") }
	s.Start()
	return m
}
