package db_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestCutStatementEndsOnServer: a statement whose caller gives up while
// it waits for a row lock ends on the server when its caller gives up,
// not when innodb_lock_wait_timeout (120 s here) ends its wait, and its
// connection serves again: the server's threads stay within the pool's
// size, with the pool exhausted too. The caller's answer is its
// deadline's error, as it was before: busy.
func TestCutStatementEndsOnServer(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it reads MySQL's process list")
	dsn := testinfra.MySQL(t) + "&innodb_lock_wait_timeout=120"
	plain := open(t, dsn) // the lock's holder and the observer, outside the shop's pool
	mustExec(t, plain, "CREATE TABLE cut (id INT PRIMARY KEY)", "INSERT INTO cut VALUES (1)")
	holder, err := plain.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	var holderID int64
	if err := holder.QueryRow("SELECT CONNECTION_ID() FROM cut WHERE id = 1 FOR UPDATE").Scan(&holderID); err != nil {
		t.Fatal(err)
	}

	const poolSize = 4
	shop := testinfra.OpenDB(t, dsn)
	sqlDB, err := shop.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(poolSize)
	threadsMax := poolSize + db.KillConns

	// threads counts the threads of the test's database other than the
	// holder's and the observer's, and those of them running a statement
	// on the locked row.
	threads := func() (all, waiting int) {
		t.Helper()
		err := plain.QueryRowContext(t.Context(), `SELECT COUNT(*), COALESCE(SUM(INFO LIKE '% cut %WHERE id = 1%'), 0)
			FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID NOT IN (?, CONNECTION_ID())`, holderID).Scan(&all, &waiting)
		if err != nil {
			t.Fatal(err)
		}
		return all, waiting
	}
	// cut runs one of the statements that wait on the row lock, under a
	// 200 ms deadline.
	statements := []func(*gorm.DB) error{
		func(tx *gorm.DB) error { return tx.Exec("UPDATE cut SET id = 1 WHERE id = 1").Error },
		func(tx *gorm.DB) error {
			var id int
			return tx.Raw("SELECT id FROM cut WHERE id = 1 FOR UPDATE").Row().Scan(&id)
		},
	}
	cut := func(i int) error {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		return statements[i%len(statements)](shop.WithContext(ctx))
	}
	// Each waits for an event on the server, not for a time: a statement
	// that is not ended there waits 120 s.
	ended := func(what string) {
		t.Helper()
		testinfra.WaitFor(t, what+" to end on the server", func() bool { _, waiting := threads(); return waiting == 0 })
		testinfra.WaitFor(t, fmt.Sprintf("at most %d threads on the server, the pool's %d and the killer's %d", threadsMax, poolSize, db.KillConns),
			func() bool { all, _ := threads(); return all <= threadsMax })
	}

	ids := map[int64]bool{} // the server's threads that served the shop's statements
	var late time.Duration  // the longest a caller waited past its deadline
	for i := range 20 {
		start := time.Now()
		if err := cut(i); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("statement %d on the locked row: %v, want its deadline's error", i, err)
		}
		late = max(late, time.Since(start)-200*time.Millisecond)
		ended(fmt.Sprintf("statement %d, once its caller gave up,", i))
		var id int64
		if err := shop.WithContext(t.Context()).Raw("SELECT CONNECTION_ID()").Row().Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	// A KILL takes a round trip or two, well within the second a cut
	// connection is waited for before the driver closes it.
	if len(ids) > poolSize {
		t.Errorf("20 statements cut one after another: the pool's connections were %d threads on the server, want at most %d: the cut connections are kept", len(ids), poolSize)
	}
	t.Logf("20 statements cut one after another: served by %d connection(s); a caller waited at most %s past its deadline", len(ids), late.Round(time.Millisecond))

	// Twice as many callers as connections: the pool is exhausted, and
	// every statement on the row is cut at once.
	var wg sync.WaitGroup
	errs := make([]error, 2*poolSize)
	for i := range errs {
		wg.Go(func() { errs[i] = cut(i) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("caller %d of the exhausted pool: %v, want its deadline's error", i, err)
		}
	}
	ended("the statements of the exhausted pool")
	if stats := sqlDB.Stats(); stats.OpenConnections > poolSize {
		t.Errorf("the pool has %d connections open, more than its %d", stats.OpenConnections, poolSize)
	}

	// The row is free once the holder ends: the connections cut serve.
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 * poolSize {
		if err := statements[i%len(statements)](shop.WithContext(t.Context())); err != nil {
			t.Errorf("statement %d once the row is free: %v", i, err)
		}
	}
}

// TestCutStatementUnreachable: when the KILL cannot reach the server (the
// endpoint holds every byte, as a paused server would), the caller is
// answered all the same, and the driver closes the connection, as it does
// on its own.
func TestCutStatementUnreachable(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it pauses a proxy in front of MySQL")
	cfg, err := mysql.ParseDSN(testinfra.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	endpoint := testinfra.StartProxy(t, cfg.Addr)
	cfg.Addr = endpoint.Addr()
	shop := testinfra.OpenDB(t, cfg.FormatDSN())
	sqlDB, err := shop.DB()
	if err != nil {
		t.Fatal(err)
	}
	c, err := sqlDB.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	endpoint.Pause()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.ExecContext(ctx, "SELECT 1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a statement through the paused endpoint: %v, want its deadline's error", err)
	}
	t.Logf("answered %s past its deadline", (time.Since(start) - 200*time.Millisecond).Round(time.Millisecond))
	c.Close()
	if n := sqlDB.Stats().OpenConnections; n != 0 {
		t.Errorf("%d connections open, want the one whose statement could not be ended closed", n)
	}
	endpoint.Resume()
	if err := shop.WithContext(t.Context()).Exec("SELECT 1").Error; err != nil {
		t.Errorf("a statement once the endpoint passes bytes again: %v", err)
	}
}
