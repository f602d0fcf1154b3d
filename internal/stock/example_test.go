package stock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/stock"
)

// Every strategy is used the same way: Adjust takes the stock and runs the
// caller's writes in the same transaction. Here the atomic strategy sells
// the last unit and records the order row with it; the next buyer is told
// it is sold out, and nothing is written for them.
func ExampleAtomic() {
	ctx := context.Background()
	gdb, done := exampleDB(ctx, 1)
	defer done()
	guard := stock.NewAtomic(gdb)
	for _, user := range []string{"ann", "bob"} {
		err := guard.Adjust(ctx, "phone", -1, func(tx stock.Tx) error {
			return tx.Rows().Exec(`INSERT INTO orders (sku, user_id, quantity, status, created_at)
				VALUES ('phone', ?, 1, 'created', CURRENT_TIMESTAMP)`, user).Error
		})
		switch {
		case errors.Is(err, stock.ErrSoldOut):
			fmt.Println(user, "sold out")
		case errors.Is(err, stock.ErrBusy):
			fmt.Println(user, "busy: nothing changed, try again")
		case err != nil:
			fmt.Println(user, err)
		default:
			fmt.Println(user, "bought")
		}
	}
	// Output:
	// ann bought
	// bob sold out
}

// The optimistic strategy reads the row and its version and writes only if
// the version is unchanged, retrying on a conflict until the ctx ends.
func ExampleOptimistic() {
	ctx := context.Background()
	gdb, done := exampleDB(ctx, 3)
	defer done()
	err := stock.NewOptimistic(gdb).Adjust(ctx, "phone", -2, func(stock.Tx) error { return nil })
	fmt.Println(err, available(ctx, gdb))
	// Output: <nil> 1
}

// The pessimistic strategy holds the row with SELECT … FOR UPDATE for the
// whole transaction; a refund is a positive delta.
func ExamplePessimistic() {
	ctx := context.Background()
	gdb, done := exampleDB(ctx, 0)
	defer done()
	err := stock.NewPessimistic(gdb).Adjust(ctx, "phone", +1, func(stock.Tx) error { return nil })
	fmt.Println(err, available(ctx, gdb))
	// Output: <nil> 1
}

// None has the same shape and no protection: two buyers who read the same
// stock both write it back, and both get an order. Use it only to watch
// that happen (the demo does, with many buyers at once).
func ExampleNone() {
	ctx := context.Background()
	gdb, done := exampleDB(ctx, 1)
	defer done()
	err := stock.NewNone(gdb).Adjust(ctx, "phone", -1, func(stock.Tx) error { return nil })
	fmt.Println(err, available(ctx, gdb))
	// Output: <nil> 0
}

// Every lock strategy is Locked on one of internal/lock's backends: it
// takes the SKU's lock, writes under the lease's fencing token, and
// releases. ErrFenced means this holder's lock had expired and a newer
// holder has written: nothing was changed. Here the lock is Local, which
// needs no server and guards one process only.
func ExampleLocked() {
	ctx := context.Background()
	gdb, done := exampleDB(ctx, 2)
	defer done()
	guard := stock.NewLocked(gdb, lock.NewLocal())
	err := guard.Adjust(ctx, "phone", -1, func(stock.Tx) error { return nil })
	if errors.Is(err, stock.ErrFenced) || errors.Is(err, stock.ErrBusy) {
		fmt.Println("busy: nothing changed, try again")
	}
	fmt.Println(err, available(ctx, gdb))
	// Output: <nil> 1
}

// Queued stands in front of any guard: once the stock is gone, a buyer is
// told so by a plain read, without waiting in the guard's queue.
func ExampleQueued() {
	ctx := context.Background()
	gdb, done := exampleDB(ctx, 0)
	defer done()
	guard := stock.NewQueued(gdb, stock.NewAtomic(gdb))
	err := guard.Adjust(ctx, "phone", -1, func(stock.Tx) error { return nil })
	fmt.Println(errors.Is(err, stock.ErrSoldOut))
	// Output: true
}

// exampleDB opens the shop's schema on the embedded SQLite, in a directory
// of its own, with units of "phone" on sale; done removes it.
func exampleDB(ctx context.Context, units int) (gdb *gorm.DB, done func()) {
	dir, err := os.MkdirTemp("", "stock-example-")
	if err != nil {
		panic(err)
	}
	gdb, err = db.Open(ctx, db.SQLitePrefix+filepath.Join(dir, "shop.db"))
	if err == nil {
		err = db.Migrate(ctx, gdb)
	}
	if err == nil {
		err = stock.Reset(ctx, gdb, "phone", units)
	}
	if err != nil {
		panic(err)
	}
	return gdb, func() { db.Close(gdb); os.RemoveAll(dir) }
}

func available(ctx context.Context, gdb *gorm.DB) int {
	it, err := stock.Get(ctx, gdb, "phone")
	if err != nil {
		panic(err)
	}
	return it.Available
}
