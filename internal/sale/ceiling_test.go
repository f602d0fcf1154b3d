package sale

import (
	"runtime"
	"testing"

	"github.com/stockguard/shop/internal/testinfra"
)

// BenchmarkCeilings runs the raw loops of `shop bench` as Go benchmarks:
// the order transactions of atomic and pessimistic on one hot row, the
// Redis Lua decrement, and a lock acquired and released on Redis and on
// ZooKeeper.
func BenchmarkCeilings(b *testing.B) {
	gdb := testinfra.ShopDB(b, testinfra.MySQL(b))
	redis, zk := testinfra.Redis(b), testinfra.ZooKeeper(b)
	probes, closeProbes, err := ceilings(b.Context(), probeServers{
		DB: gdb, Redis: redis.Addr, RedisPrefix: redis.Prefix, ZK: zk.Addrs, ZKRoot: zk.Root,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := closeProbes(); err != nil {
			b.Error(err)
		}
	})
	for _, p := range probes {
		b.Run(string(p.Key), func(b *testing.B) {
			ctx := b.Context()
			if p.Workers == 1 {
				for b.Loop() {
					if err := p.Do(ctx); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(max(1, p.Workers/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := p.Do(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
