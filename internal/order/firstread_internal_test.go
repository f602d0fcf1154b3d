package order

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// holdReads counts the first reads made on gdb. Each read, once it has
// run, waits for a value on the channel it returns before its buyers are
// answered.
func holdReads(t *testing.T, gdb *gorm.DB) (reads *atomic.Int32, release chan struct{}) {
	t.Helper()
	reads, release = new(atomic.Int32), make(chan struct{})
	err := gdb.Callback().Row().After("gorm:row").Register("test:hold-first-reads", func(tx *gorm.DB) {
		if strings.Contains(tx.Statement.SQL.String(), "LEFT JOIN orders") {
			reads.Add(1)
			<-release
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return reads, release
}

// TestFirstReadsShared: the buyers of a SKU who arrive while its read is
// out share the next read, one statement, and each hears its own answer:
// sold out, or its key's order.
func TestFirstReadsShared(t *testing.T) {
	t.Parallel()
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	ctx := t.Context()
	if err := stock.Reset(ctx, gdb, "gone", 0); err != nil {
		t.Fatal(err)
	}
	key := "k-7"
	mine := Order{SKU: "gone", UserID: "u-7", Quantity: 1, Status: StatusCreated, IdempotencyKey: &key, CreatedAt: time.Now().UTC()}
	if err := gdb.Create(&mine).Error; err != nil {
		t.Fatal(err)
	}
	reads, release := holdReads(t, gdb)
	f := NewFirstReads(gdb)
	type answer struct {
		o     Order
		found bool
		err   error
	}
	const buyers = 100
	answers := make([]answer, buyers)
	var wg sync.WaitGroup
	read := func(i int) {
		wg.Go(func() {
			r := PlaceRequest{SKU: "gone", UserID: fmt.Sprintf("u-%d", i), Quantity: 1, IdempotencyKey: fmt.Sprintf("k-%d", i)}
			a := &answers[i]
			a.o, a.found, a.err = f.First(ctx, r)
		})
	}
	read(0)
	testinfra.WaitFor(t, "the first read", func() bool { return reads.Load() == 1 })
	for i := 1; i < buyers; i++ {
		read(i)
	}
	testinfra.WaitFor(t, "the buyers to wait", func() bool {
		n, _ := f.skus.Queued("gone")
		return n == buyers-1
	})
	close(release)
	wg.Wait()

	if n := reads.Load(); n != 2 {
		t.Errorf("%d buyers took %d reads, want 2: the first, and one shared by the %d who came while it was out", buyers, n, buyers-1)
	}
	for i, a := range answers {
		switch {
		case i == 7 && (!a.found || a.err != nil || a.o.ID != mine.ID):
			t.Errorf("buyer 7, whose key has order %d: got order %d, found %v, err %v", mine.ID, a.o.ID, a.found, a.err)
		case i != 7 && !errors.Is(a.err, stock.ErrSoldOut):
			t.Errorf("buyer %d: got found %v, err %v, want sold out", i, a.found, a.err)
		}
	}
}

// TestFirstReadsNotStale: a buyer who arrives while a read is out is not
// answered by it. A unit that a refund returned before the buyer asked is
// there for it, even though the read already out saw none.
func TestFirstReadsNotStale(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it holds a read once it has run, and SQLite reads a row only when it is scanned")
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	ctx := t.Context()
	if err := stock.Reset(ctx, gdb, "back", 0); err != nil {
		t.Fatal(err)
	}
	reads, release := holdReads(t, gdb)
	f := NewFirstReads(gdb)
	var early, late error
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _, early = f.First(ctx, PlaceRequest{SKU: "back", UserID: "early", Quantity: 1, IdempotencyKey: "e"})
	})
	testinfra.WaitFor(t, "the early read", func() bool { return reads.Load() == 1 })

	// A refund returns a unit while the early read, which saw none, is out.
	if err := gdb.Exec(`UPDATE stock_items SET available = 1 WHERE sku = 'back'`).Error; err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		_, _, late = f.First(ctx, PlaceRequest{SKU: "back", UserID: "late", Quantity: 1, IdempotencyKey: "l"})
	})
	testinfra.WaitFor(t, "the late buyer to wait", func() bool {
		n, _ := f.skus.Queued("back")
		return n == 1
	})
	release <- struct{}{} // the early read answers
	close(release)        // and any read after it
	wg.Wait()

	if !errors.Is(early, stock.ErrSoldOut) {
		t.Errorf("early buyer: %v, want sold out: its read ran before the refund", early)
	}
	if late != nil {
		t.Errorf("late buyer: %v, want to queue for the unit returned before it asked", late)
	}
}
