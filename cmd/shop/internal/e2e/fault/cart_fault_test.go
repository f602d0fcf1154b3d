package fault

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/lua/redisstock"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestFaultCartsOnRedisCluster: lua on three shop processes and a Redis
// Cluster of three masters sells carts of three SKUs that live on three
// masters, each cart a saga, and one shop is killed (SIGKILL) mid-burst,
// with lines of its sagas reserved and not yet in the database. Its
// buyers retry, with their keys, on the others. Once its reservations have
// been idle for the claim timeout, one reconcile gives them back: every
// SKU's audit holds, no order has some lines and not others, every
// acknowledged cart has every line, and Redis equals the database.
func TestFaultCartsOnRedisCluster(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	seeds := testinfra.StartRedisCluster(t)
	s := newSale(t, "lua", strings.Join(seeds, ","))
	skus := testinfra.SKUsOnMasters(t, s.RDB.(*redis.ClusterClient), "cart-line", 3)
	s.onSale(t, skus...)
	lines := func(i int) []string { // 2 or 3 of the SKUs, in an order of i's
		ls := []string{skus[i%3], skus[(i+1+i/3%2)%3]}
		if i%5 == 0 {
			ls = append(ls, skus[(i+2-i/3%2)%3])
		}
		return ls
	}
	victim := s.Shops[1]
	res := s.buy(t, func(i int) history.Op {
		op := history.Op{Kind: history.Order, User: fmt.Sprint("u", i), Key: fmt.Sprint("cart-k", i)}
		for _, sku := range lines(i) {
			op.Items = append(op.Items, history.Item{SKU: sku, Quantity: 1})
		}
		return op
	}, func() {
		if err := victim.Cmd.Process.Kill(); err != nil {
			t.Error(err)
		}
	})
	_ = victim.Cmd.Wait()
	time.Sleep(3*time.Second + 500*time.Millisecond) // SHOP_CLAIM_IDLE, and a margin
	s.reconcile(t)
	acked := make([]audit.Acked, len(res.acked))
	for n, id := range res.acked {
		acked[n] = audit.Acked{ID: id, SKUs: lines(res.buyers[id])}
	}
	total, each, err := audit.SKUs(t.Context(), s.GDB, skus, res.short, acked)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range each {
		t.Logf("%s: %+v", a.SKU, a)
		if v := a.Violations(); len(v) > 0 {
			t.Errorf("%s: invariants broken: %v", a.SKU, v)
		}
		st, err := redisstock.New(s.RDB, s.Prefix).State(t.Context(), a.SKU)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Exists || st.Available != a.Available || len(st.Log) != 0 {
			t.Errorf("%s: Redis has %d available and %d pending, the database %d", a.SKU, st.Available, len(st.Log), a.Available)
		}
	}
	if total.Partial > 0 || total.MissingLines > 0 {
		t.Errorf("%d partial orders, %d acknowledged carts missing a line", total.Partial, total.MissingLines)
	}
	if len(res.acked) == 0 {
		t.Error("no cart was sold")
	}
	s.CheckHistory(t, skus...)
}
