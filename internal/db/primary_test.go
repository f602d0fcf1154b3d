package db_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
)

// pair is two servers behind one endpoint, each with the shop's database
// holding a row that names the server.
type pair struct {
	servers  map[string]*sql.DB // by name, as their test users, whom read_only does not bind
	addrs    map[string]string
	endpoint *testinfra.Proxy
	dsn      string   // the endpoint's, for the shop's user, whom read_only binds
	shop     *gorm.DB // a pool on dsn
}

func startPair(t *testing.T) *pair {
	t.Helper()
	a, b := testinfra.StartMariaDB(t), testinfra.StartMariaDB(t)
	cfg, err := mysql.ParseDSN(a.ShopDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{servers: map[string]*sql.DB{}, addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}}
	for name, m := range map[string]*testinfra.PrivateMySQL{"a": a, "b": b} {
		p.servers[name] = open(t, m.DSN(t))
		mustExec(t, p.servers[name], "CREATE DATABASE IF NOT EXISTS "+cfg.DBName,
			"CREATE TABLE "+cfg.DBName+".server (name VARCHAR(8) NOT NULL)",
			"INSERT INTO "+cfg.DBName+".server VALUES ('"+name+"')")
	}
	mustExec(t, p.servers["b"], "SET GLOBAL server_id = 2") // a's is 1, as in a replicated pair
	p.endpoint = testinfra.StartProxy(t, a.Addr())
	cfg.Addr = p.endpoint.Addr()
	p.dsn = cfg.FormatDSN()
	p.shop = testinfra.OpenDB(t, p.dsn)
	return p
}

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	sdb, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	return sdb
}

func mustExec(t *testing.T, sdb *sql.DB, statements ...string) {
	t.Helper()
	for _, s := range statements {
		if _, err := sdb.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// fill takes n connections of the shop's pool at once, idle ones first,
// opening what it lacks, and reads on each the name in the row of its
// server; then they wait idle in the pool.
func (p *pair) fill(t *testing.T, n int) []string {
	t.Helper()
	sqlDB, err := p.shop.DB()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, n)
	for i := range n {
		c, err := sqlDB.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.QueryRowContext(t.Context(), "SELECT name FROM server").Scan(&names[i]); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// reads reads, n at once, the name in the row of the server each read
// reaches.
func (p *pair) reads(t *testing.T, n int) []string {
	t.Helper()
	names := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := p.shop.WithContext(t.Context()).Raw("SELECT name FROM server").Row().Scan(&names[i]); err != nil {
				names[i] = err.Error()
			}
		})
	}
	wg.Wait()
	return names
}

// switchOver makes from read-only and to writable, and moves the
// endpoint to it: the connections open stay on from.
func (p *pair) switchOver(t *testing.T, from, to string) {
	t.Helper()
	mustExec(t, p.servers[from], "SET GLOBAL read_only = ON")
	mustExec(t, p.servers[to], "SET GLOBAL read_only = OFF")
	p.endpoint.Retarget(p.addrs[to])
}

// TestSwitchover: after a switchover, the shop's pool reaches only the
// new primary. A shop that only reads stops reading the old primary
// within a few seconds, and once one read reached the new primary, every
// read does. A write that the old primary refuses is a read-only error,
// and no connection opened before it serves again. /readyz's check sees
// the read-only server.
func TestSwitchover(t *testing.T) {
	t.Parallel()
	p := startPair(t)
	p.fill(t, 8)
	if names := p.reads(t, 8); names[0] != "a" {
		t.Fatalf("before the switchover: %q", names)
	}
	p.switchOver(t, "a", "b")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil && p.reads(t, 1)[0] != "b" {
		time.Sleep(100 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("10 s after the switchover, the shop still reads the old primary")
	}
	for i, name := range p.reads(t, 16) {
		if name != "b" {
			t.Errorf("read %d after one reached the new primary: %q", i, name)
		}
	}

	// Back to a: a transaction on b writes once b is read-only.
	p.fill(t, 8)
	tx := p.shop.WithContext(t.Context()).Begin()
	if tx.Error != nil {
		t.Fatal(tx.Error)
	}
	if err := db.Ready(t.Context(), p.shop); err != nil {
		t.Fatalf("Ready on the primary: %v", err)
	}
	p.switchOver(t, "b", "a")
	err := tx.Exec("UPDATE server SET name = 'written'").Error
	if !db.IsReadOnly(err) {
		t.Fatalf("a write on the read-only server: %v, want a read-only error", err)
	}
	tx.Rollback()
	if err := p.shop.WithContext(t.Context()).Exec("UPDATE server SET name = 'written'").Error; err != nil {
		t.Fatalf("the next write: %v, want it on the new primary", err)
	}
	for i, name := range p.reads(t, 16) {
		if name != "written" {
			t.Errorf("read %d after a refused write: %q, want the new primary's row", i, name)
		}
	}
	if err := db.Ready(t.Context(), p.shop); err != nil {
		t.Errorf("Ready on the new primary: %v", err)
	}
	p.endpoint.Retarget(p.addrs["b"])
	if err := db.Ready(t.Context(), testinfra.OpenDB(t, p.dsn)); !errors.Is(err, db.ErrReadOnly) {
		t.Errorf("Ready on a read-only server: %v, want ErrReadOnly", err)
	}
}

// TestServerMoved: once a new connection of the shop's pool reaches
// another server (@@server_id) than the connections before it, none of
// those serves again. The old primary here takes writes still, as one
// that a failover could not fence does, so that the check of read_only
// never finds its connections: only the server's id does. (Had it been
// made read-only, as in a switchover, each would serve until its next
// check, up to a second later: what a buyer told sold out whose order
// exists was suspected to have read.)
func TestServerMoved(t *testing.T) {
	t.Parallel()
	p := startPair(t)
	p.fill(t, 8)
	p.endpoint.Retarget(p.addrs["b"])
	// The 8 idle connections, on a, and one that the pool opens, on b.
	if names := p.fill(t, 9); !slices.Contains(names, "b") {
		t.Fatalf("9 connections at once, 8 of them idle on a: %q, want a new one on b", names)
	}
	for i, name := range p.fill(t, 9) {
		if name != "b" {
			t.Errorf("read %d after a connection reached b: %q, the old primary", i, name)
		}
	}
}

// BenchmarkPool is what the pool's read-only checks cost a statement: a
// transaction that writes one row, through the shop's pool and through a
// plain pool of the same driver on the same database.
func BenchmarkPool(b *testing.B) {
	testinfra.NeedsRealServers(b, "it measures the pool on MySQL")
	dsn := testinfra.MySQL(b)
	shop := testinfra.OpenDB(b, dsn)
	if err := shop.Exec("CREATE TABLE hits (id INT PRIMARY KEY, n INT NOT NULL)").Error; err != nil {
		b.Fatal(err)
	}
	sqlDB, err := shop.DB()
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.InterpolateParams = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	plain := sql.OpenDB(connector)
	plain.SetMaxOpenConns(64)
	plain.SetMaxIdleConns(64)
	b.Cleanup(func() { plain.Close() })
	var id atomic.Int64 // the rows' ids, new in every round
	for name, pool := range map[string]*sql.DB{"plain": plain, "shop": sqlDB} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tx, err := pool.BeginTx(b.Context(), nil)
					if err == nil {
						_, err = tx.Exec("INSERT INTO hits VALUES (?, 1)", id.Add(1))
					}
					if err == nil {
						err = tx.Commit()
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestRowLockWaitBounded: a session waits for a row lock 5 s at most,
// not InnoDB's 50 s, unless the DSN sets innodb_lock_wait_timeout.
func TestRowLockWaitBounded(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it reads a MySQL session variable")
	dsn := testinfra.MySQL(t)
	for _, tc := range []struct {
		dsn  string
		want int
	}{{dsn, 5}, {dsn + "&innodb_lock_wait_timeout=7", 7}} {
		gdb, err := db.Open(t.Context(), tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		var wait int
		err = gdb.Raw("SELECT @@innodb_lock_wait_timeout").Scan(&wait).Error
		db.Close(gdb)
		if err != nil || wait != tc.want {
			t.Errorf("innodb_lock_wait_timeout = %d (%v), want %d", wait, err, tc.want)
		}
	}
}
