package stock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/stock"
)

// Every strategy is used the same way: Adjust takes the stock and runs the
// caller's writes in the same transaction. Here the atomic strategy sells
// one unit and records the order row with it.
func ExampleAtomic() {
	ctx := context.Background()
	gdb, ok := exampleDB(ctx)
	if !ok {
		return
	}
	guard := stock.NewAtomic(gdb)
	err := guard.Adjust(ctx, "phone", -1, func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO orders (sku, user_id, quantity, status, created_at) VALUES ('phone', 'alice', 1, 'created', NOW(6))`).Error
	})
	switch {
	case errors.Is(err, stock.ErrSoldOut):
		fmt.Println("sold out")
	case errors.Is(err, stock.ErrBusy):
		fmt.Println("busy: nothing changed, try again")
	case err != nil:
		fmt.Println(err)
	}
}

// The optimistic strategy reads the row and its version and writes only if
// the version is unchanged, retrying on a conflict until the ctx ends.
func ExampleOptimistic() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gdb, ok := exampleDB(ctx)
	if !ok {
		return
	}
	err := stock.NewOptimistic(gdb).Adjust(ctx, "phone", -2, func(*gorm.DB) error { return nil })
	fmt.Println(err)
}

// The pessimistic strategy holds the row with SELECT … FOR UPDATE for the
// whole transaction; a refund is a positive delta.
func ExamplePessimistic() {
	ctx := context.Background()
	gdb, ok := exampleDB(ctx)
	if !ok {
		return
	}
	err := stock.NewPessimistic(gdb).Adjust(ctx, "phone", +1, func(*gorm.DB) error { return nil })
	fmt.Println(err)
}

// None has the same shape and no protection: two buyers who read the same
// stock both write it back, and both get an order. Use it only to watch
// that happen.
func ExampleNone() {
	ctx := context.Background()
	gdb, ok := exampleDB(ctx)
	if !ok {
		return
	}
	err := stock.NewNone(gdb).Adjust(ctx, "phone", -1, func(*gorm.DB) error { return nil })
	fmt.Println(err)
}

// Every lock strategy is Locked on one of internal/lock's backends: it
// takes the SKU's lock, writes under the lease's fencing token, and
// releases. ErrFenced means this holder's lock had expired and a newer
// holder has written: nothing was changed.
func ExampleLocked() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gdb, ok := exampleDB(ctx)
	if !ok {
		return
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("SHOP_REDIS_ADDR")})
	defer rdb.Close()
	guard := stock.NewLocked(gdb, lock.NewRedis(rdb, &lock.RedisOptions{TTL: 10 * time.Second}))
	err := guard.Adjust(ctx, "phone", -1, func(*gorm.DB) error { return nil })
	if errors.Is(err, stock.ErrFenced) || errors.Is(err, stock.ErrBusy) {
		fmt.Println("busy: nothing changed, try again")
	}
}

// exampleDB opens the shop's database named by SHOP_MYSQL_DSN.
func exampleDB(ctx context.Context) (*gorm.DB, bool) {
	gdb, err := db.Open(ctx, os.Getenv("SHOP_MYSQL_DSN"))
	if err != nil {
		fmt.Println(err)
		return nil, false
	}
	return gdb, true
}
