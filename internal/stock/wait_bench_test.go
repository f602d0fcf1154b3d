package stock

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/testinfra"
)

// BenchmarkReserveWait measures what `WAIT 1 <timeout>` after each
// reservation costs: reserve.lua alone, then followed by WAIT on the same
// connection, which blocks until the master's replica has the
// reservation, on a Redis Cluster master with one replica. Each of
// -cpu's goroutines is a buyer on a connection of its own. See
// docs/operations.md#redis-failover.
func BenchmarkReserveWait(b *testing.B) {
	c := testinfra.StartReplicatedRedisCluster(b)
	const sku = "wait"
	s := NewRedisStock(nil, "bench:")
	k := s.keys(sku)
	m := redis.NewClient(&redis.Options{Addr: c.MasterOf(k[kState])})
	b.Cleanup(func() { m.Close() })
	ctx := context.Background()
	if err := m.HSet(ctx, k[kState], "epoch", 1, "available", 1<<40).Err(); err != nil {
		b.Fatal(err)
	}
	if err := m.XGroupCreateMkStream(ctx, k[kLog], group, "$").Err(); err != nil {
		b.Fatal(err)
	}
	if err := reserveScript.Load(ctx, m).Err(); err != nil { // EVALSHA in a pipeline does not fall back
		b.Fatal(err)
	}
	for _, wait := range []int{0, 1} {
		b.Run(fmt.Sprintf("wait=%d", wait), func(b *testing.B) {
			var n int64
			b.RunParallel(func(pb *testing.PB) {
				conn := m.Conn()
				defer conn.Close()
				for pb.Next() {
					i := inc(&n)
					user, key := fmt.Sprint("u", i), fmt.Sprint("k", i)
					_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
						reserveScript.Run(ctx, p, []string{k[kState], k[kHoldings], k[kLog], k[kKeys], s.answerKey(sku, user, key)},
							1, user, key, 1, 0, "bench", 0, 30000, group, 0, "", "")
						if wait > 0 {
							p.Do(ctx, "WAIT", wait, 1000)
						}
						return nil
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func inc(n *int64) int64 { return atomic.AddInt64(n, 1) }
