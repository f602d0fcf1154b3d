package testinfra

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/mariadb"
)

// semiSyncTimeout is rpl_semi_sync_master_timeout on a pair's primary:
// MariaDB's default, after which a primary with no replica's ack goes on
// asynchronously.
const semiSyncTimeout = 10 * time.Second

// MySQLPair is a MariaDB primary and its replica, private to one test,
// behind an endpoint (a TCP proxy) that the shops dial as they would a
// VIP or a cloud writer endpoint. The shops log in as mariadb.Shop, whom
// read_only binds. Each fault leaves the pair with one primary and no
// replica; Restore makes the other server its replica again, so that
// subtests share one pair.
type MySQLPair struct {
	t        testing.TB
	nodes    [2]*PrivateMySQL
	admins   [2]*sql.DB // mariadb.Admin's, with no idle connection
	primary  int        // index in nodes
	serverID int        // the last server_id given
	endpoint *Proxy
	semiSync bool
}

// StartMySQLPair starts a primary and a replica, semi-synchronous
// (AFTER_SYNC) when semiSync is set and asynchronous otherwise, and the
// endpoint in front of the primary.
func StartMySQLPair(t testing.TB, semiSync bool) *MySQLPair {
	t.Helper()
	var nodes []*PrivateMySQL
	startNew(t, func() []*Server {
		nodes = installMariaDB(t, 1, 2)
		for _, n := range nodes {
			// Restore puts a killed server back from its data as installed.
			if err := copyDir(n.data, n.data+".installed"); err != nil {
				t.Fatalf("testinfra: %v", err)
			}
		}
		return []*Server{nodes[0].Server, nodes[1].Server}
	})
	p := &MySQLPair{t: t, nodes: [2]*PrivateMySQL(nodes), semiSync: semiSync, serverID: 2}
	for i, s := range p.nodes {
		// Each use dials afresh: no connection outlives a server killed.
		db, err := sql.Open("mysql", s.dsn)
		p.must(i, err)
		db.SetMaxIdleConns(0)
		t.Cleanup(func() { db.Close() })
		p.admins[i] = db
	}
	p.endpoint = StartProxy(t, p.nodes[0].Addr())
	p.join(1)
	return p
}

// DSN returns a DSN of mariadb.Shop through the endpoint, with
// parseTime=true, for a fresh database made on the primary now.
func (p *MySQLPair) DSN(t testing.TB) string {
	t.Helper()
	direct := p.nodes[p.primary].DSN(t)
	cfg, err := mysql.ParseDSN(direct)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd, cfg.Addr = mariadb.Shop, mariadb.Shop, p.endpoint.Addr()
	return cfg.FormatDSN()
}

// Primary returns the address of the server that is primary now.
func (p *MySQLPair) Primary() string { return p.nodes[p.primary].Addr() }

// ShopConnections returns the connections mariadb.Shop has open on the
// server at addr, one line each from its process list: id, command,
// seconds in it, state and statement.
func (p *MySQLPair) ShopConnections(addr string) []string {
	p.t.Helper()
	i := slices.IndexFunc(p.nodes[:], func(n *PrivateMySQL) bool { return n.Addr() == addr })
	rows, err := p.admin(i).QueryContext(p.t.Context(), "SELECT CONCAT_WS(' ', ID, COMMAND, TIME, STATE, INFO) FROM information_schema.PROCESSLIST WHERE USER = ?", mariadb.Shop)
	p.must(i, err)
	defer rows.Close()
	var conns []string
	for rows.Next() {
		var c string
		p.must(i, rows.Scan(&c))
		conns = append(conns, c)
	}
	p.must(i, rows.Err())
	return conns
}

// KillPrimaryAndPromote kills the primary (SIGKILL), has the replica
// apply what it received and take writes, and moves the endpoint to it,
// closing every connection the endpoint carried. It returns the killed
// server's address.
func (p *MySQLPair) KillPrimaryAndPromote() (old string) {
	p.t.Helper()
	dead, next := p.nodes[p.primary], 1-p.primary
	dead.Kill()
	p.promote(next)
	p.endpoint.Retarget(p.nodes[next].Addr())
	p.endpoint.Drop()
	return dead.Addr()
}

// Switchover hands the primary's role to the replica as an operator
// plans it: the primary is set read_only and keeps running, the replica
// applies everything and takes writes, and the endpoint sends new
// connections to it, while those open stay on the old primary. It
// returns the old primary's address.
func (p *MySQLPair) Switchover() (old string) {
	p.t.Helper()
	prev, next := p.primary, 1-p.primary
	ctx, cancel := context.WithTimeout(p.t.Context(), time.Minute)
	defer cancel()
	primary, replica := p.admin(prev), p.admin(next)
	_, err := primary.ExecContext(ctx, "SET GLOBAL read_only = ON")
	p.must(prev, err)
	_, err = replica.ExecContext(ctx, "START SLAVE SQL_THREAD") // were it lagging
	if err == nil {
		err = mariadb.CatchUp(ctx, primary, replica)
	}
	p.must(next, err)
	p.promote(next)
	p.endpoint.Retarget(p.nodes[next].Addr())
	return p.nodes[prev].Addr()
}

// Lag stops the replica's applier: it goes on receiving, and
// acknowledging under semi-sync, what the primary sends, and applies none
// of it until it is promoted or Restore.
func (p *MySQLPair) Lag() {
	p.t.Helper()
	_, err := p.admin(1-p.primary).ExecContext(p.t.Context(), "STOP SLAVE SQL_THREAD")
	p.must(1-p.primary, err)
}

// Restore makes the old primary the replica of the primary again,
// semi-synchronous if the pair is, once it has caught up. A killed one
// may hold transactions that no replica received, so it starts anew from
// its data as installed and replays the primary's binary log, which holds
// the pair's whole history, under a server_id of its own: a replica skips
// the events of its own id. One that was switched over rejoins as it is.
func (p *MySQLPair) Restore() {
	p.t.Helper()
	i := 1 - p.primary
	if old := p.nodes[i]; old.Pid() == 0 {
		old.Empty()
		p.must(i, copyDir(old.data+".installed", old.data))
		old.Start()
		p.serverID++
		_, err := p.admin(i).ExecContext(p.t.Context(), fmt.Sprint("SET GLOBAL server_id = ", p.serverID))
		p.must(i, err)
	}
	p.join(i)
}

// join makes nodes[i] the replica of the primary and waits until it has
// caught up, and, under semi-sync, until the primary waits for it.
func (p *MySQLPair) join(i int) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.t.Context(), time.Minute)
	defer cancel()
	primary, replica := p.admin(p.primary), p.admin(i)
	err := mariadb.SemiSync(ctx, replica, false, semiSyncTimeout)
	if err == nil {
		err = mariadb.Replicate(ctx, replica, p.Primary())
	}
	p.must(i, err)
	err = mariadb.CatchUp(ctx, primary, replica)
	if err == nil && p.semiSync {
		err = mariadb.SemiSync(ctx, primary, true, semiSyncTimeout)
	}
	if err == nil && p.semiSync {
		err = mariadb.AwaitSemiSync(ctx, primary)
	}
	p.must(p.primary, err)
}

// promote makes nodes[i] the primary. It has no replica until Restore,
// so that it waits for none.
func (p *MySQLPair) promote(i int) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.t.Context(), time.Minute)
	defer cancel()
	db := p.admin(i)
	err := mariadb.Promote(ctx, db)
	if err == nil {
		err = mariadb.SemiSync(ctx, db, false, semiSyncTimeout)
	}
	p.must(i, err)
	p.primary = i
}

// admin returns mariadb.Admin's connection pool to nodes[i].
func (p *MySQLPair) admin(i int) *sql.DB { return p.admins[i] }

// copyDir copies the directory from to to, which must not exist.
func copyDir(from, to string) error {
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %w: %s", from, to, err, out)
	}
	return nil
}

// must fails the test if err, an error of nodes[i], is not nil.
func (p *MySQLPair) must(i int, err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatalf("testinfra: MariaDB pair, %s: %v", p.nodes[i].Addr(), err)
	}
}
