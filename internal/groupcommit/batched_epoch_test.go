package groupcommit

import (
	"errors"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestBatchRefusesLostEpoch: in one batch of lua reservations, those taken
// from a Redis state of an epoch since lost are refused busy, and only the
// current epoch's are persisted and take stock, although the batch takes
// every unit with its first statement.
func TestBatchRefusesLostEpoch(t *testing.T) {
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	ctx := t.Context()
	const sku = "epochs"
	if err := stock.Reset(ctx, gdb, sku, 10); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := stock.NextEpoch(gdb, sku); err != nil {
			t.Fatal(err)
		}
	}
	epochs := []int64{2, 1, 2, 1}
	batch := make([]*Request[struct{}], len(epochs))
	for i, e := range epochs {
		user := fmt.Sprint("user-", i)
		batch[i] = &Request[struct{}]{Ctx: ctx, Order: order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: user}, Epoch: e}
	}
	var answers []order.Answer
	var left int
	err := gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) (err error) {
		answers, left, err = decide(tx, Mode{Held: true}, sku, batch, map[order.UserKey]order.Order{}, order.IDSourceOf(tx))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		if current := epochs[i] == 2; current != (a.Err == nil) || !current && !errors.Is(a.Err, stock.ErrBusy) {
			t.Errorf("reservation %d of epoch %d: %v", i, epochs[i], a.Err)
		}
	}
	it, err := stock.Get(ctx, gdb, sku)
	if err != nil {
		t.Fatal(err)
	}
	var orders int64
	if err := gdb.Model(&order.Order{}).Where("sku = ?", sku).Count(&orders).Error; err != nil {
		t.Fatal(err)
	}
	if left != 8 || it.Available != 8 || orders != 2 {
		t.Errorf("left %d, available %d, %d orders; want 8, 8 and 2", left, it.Available, orders)
	}
}
