package groupcommit

import (
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/testinfra"
)

// BenchmarkBatched places orders from many goroutines through the batched
// strategy on real MySQL, one SKU with stock for all: ns/op is per order,
// group commit included.
func BenchmarkBatched(b *testing.B) {
	testinfra.NeedsRealServers(b, "it measures group commit on MySQL")
	gdb := testinfra.ShopDB(b, testinfra.MySQL(b))
	svc := order.NewService(gdb, NewBatched(gdb, order.Rules{}).Placement(), nil)
	if err := stock.Reset(b.Context(), gdb, "hot", 1_000_000_000); err != nil {
		b.Fatal(err)
	}
	run := rand.Text()[:8]
	var n atomic.Int64
	b.SetParallelism(32) // buyers waiting at once, so that batches form
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			user := fmt.Sprint(run, "-", n.Add(1))
			if _, _, err := svc.Place(b.Context(), order.PlaceRequest{SKU: "hot", UserID: user, Quantity: 1, IdempotencyKey: user}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkBatchTransaction runs the batch transaction alone, as the
// writer's first attempt runs it (no key has an order yet, so no lookup), a
// full batch of maxBatch orders each time: ns/op is per batch.
func BenchmarkBatchTransaction(b *testing.B) {
	testinfra.NeedsRealServers(b, "it measures the batch transaction on MySQL")
	gdb := testinfra.ShopDB(b, testinfra.MySQL(b))
	ctx := b.Context()
	if err := stock.Reset(ctx, gdb, "hot", 1_000_000_000); err != nil {
		b.Fatal(err)
	}
	w := NewWriter[struct{}](gdb, "batched", Mode{}, nil, nil)
	run := rand.Text()[:8]
	round := 0
	for b.Loop() {
		round++
		batch := make([]*Request[struct{}], maxBatch)
		for i := range batch {
			user := fmt.Sprint(run, "-", round, "-", i)
			batch[i] = &Request[struct{}]{Ctx: ctx, Order: order.PlaceRequest{SKU: "hot", UserID: user, Quantity: 1, IdempotencyKey: user}}
		}
		var answers []order.Answer
		if err := gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) (err error) {
			answers, _, err = decide(tx, Mode{}, "hot", batch, map[order.UserKey]order.Order{}, w.idSource(tx))
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if answers[0].Err != nil {
			b.Fatal(answers[0].Err)
		}
	}
	b.ReportMetric(float64(maxBatch)*float64(b.N)/b.Elapsed().Seconds(), "orders/s")
}
