package testinfra

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/mariadb"
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

// ShopDSN is DSN for mariadb.Shop, whom the server's read_only binds (it
// lacks READ ONLY ADMIN), as it binds a shop in production: its writes
// are refused while read_only is on. The test's own user, of DSN, may set
// read_only.
func (m *PrivateMySQL) ShopDSN(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(m.DSN(t))
	if err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	cfg.User, cfg.Passwd = mariadb.Shop, mariadb.Shop
	return cfg.FormatDSN()
}

// StartMariaDB starts a MariaDB server private to the test, through
// Debian's mariadb-install-db and mariadbd (see internal/mariadb), on a
// free loopback port with a data dir of its own; it is killed at cleanup.
//
// Its data survives Stop, Kill and Start: a killed server recovers what
// it committed from its redo log, as a crashed one does. Every start runs
// with the same command line.
func StartMariaDB(t testing.TB) *PrivateMySQL {
	t.Helper()
	var m *PrivateMySQL
	startOne(t, func() *Server {
		m = installMariaDB(t, 0)[0]
		return m.Server
	})
	return m
}

// installMariaDB prepares a private server for each of serverIDs (as in
// mariadb.Node), installed side by side, without starting them.
func installMariaDB(t testing.TB, serverIDs ...int) []*PrivateMySQL {
	t.Helper()
	skipShort(t, "a MariaDB server process of the test's own")
	lookPath(t, "mariadb-install-db", "mariadb-server")
	lookPath(t, "mariadbd", "mariadb-server")
	servers := make([]*PrivateMySQL, len(serverIDs))
	errs := make([]error, len(serverIDs))
	var wg sync.WaitGroup
	for i, id := range serverIDs {
		dir := t.TempDir()
		n := mariadb.Node{Dir: dir, Addr: freeAddr(t), ServerID: id}
		s := newServer(t, "mariadbd", n.Addr, dir, 60*time.Second)
		s.data = n.Data()
		s.command = func() *exec.Cmd {
			cmd, err := n.Command()
			if err != nil {
				t.Errorf("testinfra: %v", err)
				return exec.Command("false")
			}
			return cmd
		}
		m := &PrivateMySQL{Server: s, dsn: n.DSN(mariadb.Admin, "")}
		s.ready = func(ctx context.Context) error { return execSQL(ctx, m.dsn, "SELECT 1") }
		servers[i] = m
		wg.Go(func() { errs[i] = n.Install(t.Context()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	return servers
}
