package redisstock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	s := New(nil, "bench:")
	k := s.keys(sku)
	m := redis.NewClient(&redis.Options{Addr: c.MasterOf(k[kState])})
	b.Cleanup(func() { m.Close() })
	ctx := context.Background()
	putOnSale(b, m, k)
	for _, wait := range []int{0, 1} {
		b.Run(fmt.Sprintf("wait=%d", wait), func(b *testing.B) {
			var n int64
			b.RunParallel(func(pb *testing.PB) {
				conn := m.Conn()
				defer conn.Close()
				for pb.Next() {
					i := inc(&n)
					user, key := fmt.Sprint("u", i), fmt.Sprint("k", i)
					if _, _, err := reserveAndWait(ctx, conn, s, sku, user, key, wait); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func inc(n *int64) int64 { return atomic.AddInt64(n, 1) }

// BenchmarkReserveFailover measures what WAIT saves: 16 buyers reserve as
// fast as they can on a master, which is killed (SIGKILL) 300 ms in; once
// its replica is promoted, it counts the reservations answered ok (and,
// with WAIT, acknowledged by the replica) that the promoted replica's log
// lacks. Run it with -benchtime 1x: each run starts a cluster.
func BenchmarkReserveFailover(b *testing.B) {
	for _, wait := range []int{0, 1} {
		b.Run(fmt.Sprintf("wait=%d", wait), func(b *testing.B) {
			for range b.N {
				acked, lost := reserveThroughKill(b, wait)
				b.ReportMetric(float64(acked), "acked")
				b.ReportMetric(float64(lost), "lost")
			}
		})
	}
}

// reserveThroughKill is one run of BenchmarkReserveFailover.
func reserveThroughKill(b *testing.B, wait int) (acked, lost int) {
	c := testinfra.StartReplicatedRedisCluster(b)
	const sku = "failover"
	s := New(nil, "bench:")
	k := s.keys(sku)
	master := c.MasterOf(k[kState])
	m := redis.NewClient(&redis.Options{Addr: master, MaxRetries: -1})
	defer m.Close()
	ctx := context.Background()
	putOnSale(b, m, k)
	c.AwaitSynced()
	var mu sync.Mutex
	var ids []string
	var n int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			conn := m.Conn()
			defer conn.Close()
			for {
				i := inc(&n)
				user, key := fmt.Sprint("u", i), fmt.Sprint("k", i)
				res, w, err := reserveAndWait(ctx, conn, s, sku, user, key, wait)
				if err != nil {
					return // the master is gone
				}
				v, _ := res.StringSlice()
				if w != nil && w.Val() != int64(wait) {
					continue // not on the replica in time: not acknowledged
				}
				mu.Lock()
				ids = append(ids, v[1])
				mu.Unlock()
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	promoted := c.Kill(master)
	wg.Wait()
	r := redis.NewClient(&redis.Options{Addr: promoted})
	defer r.Close()
	msgs, err := r.XRange(ctx, k[kLog], "-", "+").Result()
	if err != nil {
		b.Fatal(err)
	}
	have := make(map[string]bool, len(msgs))
	for _, msg := range msgs {
		have[msg.ID] = true
	}
	for _, id := range ids {
		if !have[id] {
			lost++
		}
	}
	return len(ids), lost
}

// putOnSale gives sku's state on master m as good as endless stock, and
// loads reserve.lua: EVALSHA in a pipeline does not fall back to EVAL.
func putOnSale(b *testing.B, m *redis.Client, k []string) {
	ctx := context.Background()
	if err := m.HSet(ctx, k[kState], "epoch", 1, "available", 1<<40).Err(); err != nil {
		b.Fatal(err)
	}
	if err := m.XGroupCreateMkStream(ctx, k[kLog], group, "$").Err(); err != nil {
		b.Fatal(err)
	}
	if err := reserveScript.Load(ctx, m).Err(); err != nil {
		b.Fatal(err)
	}
}

// reserveAndWait reserves a unit of sku for user and key on conn, then,
// if wait > 0, sends WAIT wait 1000 in the same pipeline, on the same
// connection. w is nil without WAIT.
func reserveAndWait(ctx context.Context, conn *redis.Conn, s *Stock, sku, user, key string, wait int) (res, w *redis.Cmd, err error) {
	k := s.keys(sku)
	_, err = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		res = reserveScript.EvalSha(ctx, p, []string{k[kState], k[kHoldings], k[kLog], k[kKeys], s.answerKey(sku, user, key)},
			1, user, key, 1, 0, "bench", 0, 30000, group, 0, "", "")
		if wait > 0 {
			w = p.Do(ctx, "WAIT", wait, 1000)
		}
		return nil
	})
	return res, w, err
}
