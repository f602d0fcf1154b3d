package stock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// givebackSetup returns the redis lock strategy, behind its queue as serve
// builds it, its locker, and a database with sku "hot" at 5 units and a
// table "moved" in which each change's Fn records its delta.
func givebackSetup(t *testing.T) (*gorm.DB, stock.Guard, *lock.Redis) {
	t.Helper()
	gdb := open(t, testinfra.MySQL(t))
	if err := gdb.Exec("CREATE TABLE moved (id BIGINT AUTO_INCREMENT PRIMARY KEY, delta INT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	ns := testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: ns.Addr})
	t.Cleanup(func() { rdb.Close() })
	locker := lock.NewRedis(rdb, &lock.RedisOptions{TTL: 10 * time.Second, Prefix: ns.Prefix + "lock:"})
	return gdb, stock.NewQueued(gdb, stock.NewLocked(gdb, locker)), locker
}

// record is a change's Fn: it records delta in "moved".
func record(delta int) stock.Fn {
	return func(tx stock.Tx) error { return tx.Rows().Exec("INSERT INTO moved (delta) VALUES (?)", delta).Error }
}

// exact fails t unless the available stock is 5 plus every recorded delta,
// read from the database.
func exact(t *testing.T, gdb *gorm.DB) int {
	t.Helper()
	var moved int
	if err := gdb.Raw("SELECT COALESCE(SUM(delta), 0) FROM moved").Scan(&moved).Error; err != nil {
		t.Fatal(err)
	}
	it, err := stock.Get(t.Context(), gdb, "hot")
	if err != nil {
		t.Fatal(err)
	}
	if it.Available != 5+moved {
		t.Errorf("available %d, want 5 + %d recorded", it.Available, moved)
	}
	return it.Available
}

// TestGiveBackWhileLockHeld: a give-back (an expiry, a cancel, a refund)
// returns its units while a buyer holds the SKU's lock, without waiting for
// it; the holder's write then reads the units given back, and a stale
// holder's write is still refused by the fence.
func TestGiveBackWhileLockHeld(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it holds a Redis lock")
	gdb, guard, locker := givebackSetup(t)
	lease, err := locker.Acquire(t.Context(), stock.LockName("hot"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := guard.Adjust(ctx, "hot", 2, record(2)); err != nil {
		t.Fatalf("give-back with the lock held by a buyer: %v, want it done", err)
	}
	if err := guard.AdjustLines(ctx, []stock.Line{{SKU: "hot", Delta: 1}}, record(1)); err != nil {
		t.Fatalf("a cart's give-back with the lock held by a buyer: %v, want it done", err)
	}
	if err := stock.Fenced(t.Context(), gdb, "hot", -8, lease.Token(), record(-8)); err != nil {
		t.Fatalf("the holder takes all 8 units, given back ones too: %v", err)
	}
	if err := stock.Fenced(t.Context(), gdb, "hot", 0, lease.Token()-1, record(0)); !errors.Is(err, stock.ErrFenced) {
		t.Errorf("a stale holder's write: %v, want ErrFenced", err)
	}
	if n := exact(t, gdb); n != 0 {
		t.Errorf("available %d, want 0", n)
	}
}

// TestGiveBackAmidBuyers: give-backs that come between lock holders' reads
// and writes are never overwritten: the stock stays exact.
func TestGiveBackAmidBuyers(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it runs the Redis lock")
	gdb, guard, _ := givebackSetup(t)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			delta := -1
			if i%2 == 0 {
				delta = 1
			}
			err := guard.Adjust(t.Context(), "hot", delta, record(delta))
			if err != nil && !errors.Is(err, stock.ErrSoldOut) {
				t.Errorf("delta %d: %v", delta, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	exact(t, gdb)
}
