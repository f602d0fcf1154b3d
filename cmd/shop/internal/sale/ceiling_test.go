package sale

import (
	"maps"
	"runtime"
	"testing"

	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// BenchmarkCeilings runs the raw loops of `shop bench` as Go benchmarks:
// the order transactions of atomic and pessimistic on one hot row, the
// group-commit transaction, the Redis Lua decrement, and each lock
// strategy's serial hand-over (acquire, fence claim, order transaction,
// release). sql-batched's ns/op is per transaction of batchSize orders.
func BenchmarkCeilings(b *testing.B) {
	testinfra.NeedsRealServers(b, "it measures the servers' raw loops")
	atomic, _ := strategy.Lookup("atomic")
	env := strategytest.Env(b, atomic)
	var locks []strategy.Strategy
	for _, s := range strategy.All() {
		if s.Lock != nil {
			locks = append(locks, s)
			maps.Copy(env, strategytest.NeedsEnv(b, s))
		}
	}
	cfg := strategytest.Load(b, env)
	probes, closeProbes, err := ceilings(b.Context(), testinfra.ShopDB(b, cfg.MySQLDSN), cfg, locks)
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
