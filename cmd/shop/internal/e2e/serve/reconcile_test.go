package serve

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
)

// TestReconcileCommand: with lua's Redis state of a SKU gone, as after a
// restart of Redis, `shop reconcile` rebuilds it from the database, says
// so, and the sale goes on from what the database had sold.
func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	s := newShop(t, "SHOP_STRATEGY=lua", "SHOP_RECONCILE_INTERVAL=1h")
	s.putStock(t, "rc", 5)
	var acked []int64
	for i := range 3 {
		r, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", fmt.Sprint("k", i), fmt.Sprintf(`{"sku":"rc","user_id":"u%d","quantity":1}`, i))
		if err != nil || r.Code != http.StatusCreated {
			t.Fatalf("order %d: %+v %v", i, r, err)
		}
		acked = append(acked, r.ID)
	}
	if n := s.flushKeys(t); n == 0 {
		t.Fatal("no keys in Redis to flush")
	}
	env := map[string]string{"SHOP_MYSQL_DSN": s.dsn, "SHOP_REDIS_ADDR": s.redis.Options().Addr, "SHOP_REDIS_PREFIX": s.prefix}
	var out, errs bytes.Buffer
	if err := shoptest.Run(context.Background(), []string{"reconcile"}, func(k string) string { return env[k] }, &out, &errs); err != nil {
		t.Fatalf("shop reconcile: %v\n%s", err, errs.String())
	}
	t.Logf("shop reconcile:\n%s", out.String())
	if !strings.Contains(out.String(), "rc: database 2, pending 0, redis none -> 2") || !strings.Contains(out.String(), "rebuilt, missing") {
		t.Errorf("the report does not say that rc's state was missing and rebuilt with 2 units:\n%s", out.String())
	}
	var soldOut int
	for i := 3; i < 6; i++ {
		r, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", fmt.Sprint("k", i), fmt.Sprintf(`{"sku":"rc","user_id":"u%d","quantity":1}`, i))
		switch {
		case err != nil:
			t.Fatal(err)
		case r.Code == http.StatusCreated:
			acked = append(acked, r.ID)
		case r.Type == "sold-out":
			soldOut++
		default:
			t.Errorf("order %d: %+v", i, r)
		}
	}
	if a := s.audit(t, "rc", soldOut, acked); a.Orders != 5 || soldOut != 1 {
		t.Errorf("%d orders, %d sold out; want 5 and 1", a.Orders, soldOut)
	}
}
