package backend_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/testinfra"
)

// closedAddr returns a loopback address on which nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func check(t *testing.T, what string, err error, want bool) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if got := backend.Unavailable(fmt.Errorf("wrapped: %w", err)); got != want {
		t.Errorf("%s: Unavailable(%v) = %v, want %v", what, err, got, want)
	}
}

// TestUnavailableMySQL: a refused connection, a server killed under an
// open one and a read-only server's refusal are unavailable; the server's
// answers to bad statements are not.
func TestUnavailableMySQL(t *testing.T) {
	t.Parallel()
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User = "tcp", closedAddr(t), "nobody"
	refused, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	check(t, "refused", refused.PingContext(t.Context()), true)

	m := testinfra.StartMariaDB(t)
	db, err := sql.Open("mysql", m.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(t.Context(), "INSERT INTO t VALUES (1), (1)")
	check(t, "duplicate key", err, false)
	_, err = db.ExecContext(t.Context(), "SELEKT 1")
	check(t, "syntax error", err, false)
	check(t, "no rows", db.QueryRowContext(t.Context(), "SELECT id FROM t WHERE id = 2").Scan(new(int)), false)

	// A user that read_only binds, as a shop in production.
	shop, err := sql.Open("mysql", m.ShopDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer shop.Close()
	if _, err := shop.ExecContext(t.Context(), "CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "SET GLOBAL read_only = ON"); err != nil {
		t.Fatal(err)
	}
	_, err = shop.ExecContext(t.Context(), "INSERT INTO t VALUES (1)")
	check(t, "read-only server", err, true)
	if _, err := db.ExecContext(t.Context(), "SET GLOBAL read_only = OFF"); err != nil {
		t.Fatal(err)
	}

	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Kill()
	_, err = tx.ExecContext(t.Context(), "INSERT INTO t VALUES (2)")
	check(t, "killed mid-transaction", err, true)
	_ = tx.Rollback()
	_, err = db.ExecContext(t.Context(), "INSERT INTO t VALUES (3)")
	check(t, "killed, a new statement", err, true)
}

// TestUnavailableRedis: a refused connection and a killed server are
// unavailable; Redis's answers to a bad command are not.
func TestUnavailableRedis(t *testing.T) {
	t.Parallel()
	refused := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1})
	defer refused.Close()
	check(t, "refused", refused.Ping(t.Context()).Err(), true)

	s := testinfra.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	check(t, "wrong type", c.HGet(t.Context(), "k", "f").Err(), false)
	check(t, "nil", c.Get(t.Context(), "missing").Err(), false)
	s.Kill()
	check(t, "killed", c.Get(t.Context(), "k").Err(), true)
}

// TestUnavailableZooKeeper: a session that cannot reach its server is
// unavailable; a missing node is not.
func TestUnavailableZooKeeper(t *testing.T) {
	t.Parallel()
	s := testinfra.StartZooKeeper(t)
	conn, _, err := zk.Connect([]string{s.Addr()}, 4*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _, err = conn.Get("/missing")
	check(t, "no node", err, false)
	s.Kill()
	_, _, err = conn.Get("/")
	check(t, "killed", err, true)
}

// TestUnavailableEtcd: a client with no endpoint is unavailable, and one
// whose server is gone waits for it until its deadline, which the shop
// answers busy too; a transaction the server refuses is neither.
func TestUnavailableEtcd(t *testing.T) {
	t.Parallel()
	_, err := clientv3.New(clientv3.Config{Logger: zap.NewNop()})
	check(t, "no endpoint", err, true)

	s := testinfra.StartEtcd(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Txn(t.Context()).Then(clientv3.OpPut("k", "1"), clientv3.OpPut("k", "2")).Commit()
	check(t, "a key twice in one transaction", err, false)
	s.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err = c.Get(ctx, "k"); !backend.Unavailable(err) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("killed: %v, want unavailable or the deadline", err)
	}
}
