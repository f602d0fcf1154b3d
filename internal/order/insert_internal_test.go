package order

import (
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/testinfra"
)

// TestInsertOrders: however a batch learns its orders' ids, each order has
// its own row's id, and its row what the order says, a pending order's
// deadline included.
func TestInsertOrders(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "ids counted or read back are MySQL's ways; SQLite returns them")
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	for name, ids := range map[string]IDSource{"returned": idsReturned, "counted": idsCounted, "read back": idsRead} {
		t.Run(name, func(t *testing.T) {
			orders := make([]Order, 5)
			for i := range orders {
				key := fmt.Sprint("k-", ids, "-", i)
				orders[i] = Order{SKU: "ids", UserID: fmt.Sprint("u-", i), Quantity: i + 1, Status: StatusCreated, IdempotencyKey: &key, CreatedAt: Now()}
				if i%2 == 1 {
					deadline := orders[i].CreatedAt.Add(time.Minute)
					orders[i].Status, orders[i].ExpiresAt = StatusPending, &deadline
				}
			}
			err := gdb.WithContext(t.Context()).Transaction(func(tx *gorm.DB) error { return InsertOrders(tx, orders, ids) })
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range orders {
				var got Order
				if err := gdb.Where("id = ?", o.ID).Take(&got).Error; err != nil || *got.IdempotencyKey != *o.IdempotencyKey ||
					got.Quantity != o.Quantity || !got.CreatedAt.Equal(o.CreatedAt) || got.Status != o.Status ||
					(got.ExpiresAt == nil) != (o.ExpiresAt == nil) || (o.ExpiresAt != nil && !got.ExpiresAt.Equal(*o.ExpiresAt)) {
					t.Errorf("order %d is %+v (%v), want %+v", o.ID, got, err, o)
				}
			}
		})
	}
}
