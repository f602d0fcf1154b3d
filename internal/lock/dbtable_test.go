package lock_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestDBTableReleaseDeadlock: InnoDB may pick a release as the victim of a
// deadlock with another instance's statements on the lock's row (an
// insert's duplicate check, or a takeover's delete by name, lock the name's
// index entry before the row). The release must still delete the row: one
// left behind keeps every instance out until it expires.
//
// The deadlock is made on purpose here, in a transaction of the test's: it
// holds the name's index entry while the release waits for it, then asks
// for the row that the release holds. Its own inserts make it the larger
// transaction, so InnoDB rolls the release back.
func TestDBTableReleaseDeadlock(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "the deadlock is InnoDB's")
	dsn := testinfra.MySQL(t)
	testinfra.ShopDB(t, dsn) // the locks table
	sqlDB, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlDB.Close() })
	ctx := t.Context()
	l := lock.NewDBTable(sqlDB, &lock.DBTableOptions{TTL: time.Minute})
	lease, err := l.Acquire(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}

	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range 20 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO locks (name, owner, expires_at) VALUES (?, 'test', UTC_TIMESTAMP(6))`, fmt.Sprint("pad-", i)); err != nil {
			t.Fatal(err)
		}
	}
	var name string
	if err := tx.QueryRowContext(ctx, `SELECT name FROM locks WHERE name = 'hot' LOCK IN SHARE MODE`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		released <- lease.Release(rctx)
	}()
	// Once the release waits for the name's entry, close the cycle. A delete
	// by key that is still running after 200 ms, in this test's own database,
	// waits for the one transaction that holds locks here: the test's.
	// (information_schema.innodb_trx is no help: MariaDB lists a transaction
	// there only once it has written.)
	waiting := func() bool {
		var n int
		err := sqlDB.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND info LIKE 'DELETE FROM locks WHERE token%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		if waiting() {
			time.Sleep(200 * time.Millisecond)
			if waiting() {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the release never waited for the name's entry")
		}
	}
	var token int64
	if err := tx.QueryRowContext(ctx, `SELECT token FROM locks WHERE name = 'hot'`).Scan(&token); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT token FROM locks WHERE token = ? FOR UPDATE`, token).Scan(&token); err != nil {
		t.Fatalf("the test's transaction, not the release, was the deadlock's victim: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatalf("release: %v", err)
	}
	var left int
	if err := sqlDB.QueryRowContext(ctx, `SELECT COUNT(*) FROM locks WHERE name = 'hot'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows of the lock left after its release (%v)", left, err)
	}
}
