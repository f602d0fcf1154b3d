package lesson

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

func init() {
	register(Lesson{Number: 15, Name: "restock-race", Seed: "seed 002",
		Claim:    "read the stock, then write back what was computed, and one writer's change is lost under another's: two operators restocking lose units as buyers oversell",
		Setup:    "two operators restock 5 units by 10 each at once; both read the stock before either writes, as concurrent requests interleave",
		Takeaway: "change stock by a delta (POST /api/v1/stock/{sku}/adjustments), or compare-and-set with expected_available and read again on 409 stale; the movements show a lost restock as a set of +0",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return restockRace(ctx, env, "restock-race-mistake", "GET, then PUT available+10", func(svc *order.Service, sku string, op, read int) error {
				_, err := svc.SetStock(ctx, sku, read+restockBy)
				return err
			})
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			delta, err := restockRace(ctx, env, "restock-race-delta", "", func(svc *order.Service, sku string, op, _ int) error {
				key := fmt.Sprint("restock-", op)
				_, _, err := svc.Adjust(ctx, stock.Movement{SKU: sku, Delta: restockBy, Reason: stock.ReasonRestock, Reference: key, Key: &key})
				return err
			})
			if err != nil {
				return Trial{}, err
			}
			cas, err := restockRace(ctx, env, "restock-race-expected", "", compareAndSet(ctx))
			if err != nil {
				return Trial{}, err
			}
			return Trial{Name: "POST …/adjustments {\"delta\":10}; PUT with expected_available, read again on 409 stale",
				Numbers: map[string]int64{"available_by_delta": delta.Numbers["available"], "available_by_expected": cas.Numbers["available"],
					"lost_by_delta": delta.Numbers["lost"], "lost_by_expected": cas.Numbers["lost"]},
				Happened: fmt.Sprintf("by delta: %d available, %d lost; by expected_available: %d available, %d lost",
					delta.Numbers["available"], delta.Numbers["lost"], cas.Numbers["available"], cas.Numbers["lost"]),
				Failed: delta.Failed || cas.Failed}, nil
		},
	})
}

// The race's numbers: units on sale, and each operator's restock.
const restockUnits, restockBy = 5, 10

// restocker is one operator's restock of sku, given the available it read.
type restocker func(svc *order.Service, sku string, op, read int) error

// compareAndSet restocks with expected_available, reading again when the
// stock has changed since the operator read it.
func compareAndSet(ctx context.Context) restocker {
	return func(svc *order.Service, sku string, _, read int) error {
		for {
			_, err := svc.SetStockExpected(ctx, sku, read+restockBy, read)
			var stale *stock.NotExpectedError
			if !errors.As(err, &stale) {
				return err
			}
			read = stale.Available
		}
	}
}

// restockRace puts restockUnits of the lesson's SKU name on sale; two
// operators read its stock, and then each restocks it. The numbers are
// read from the database afterwards.
func restockRace(ctx context.Context, env *Env, name, trial string, restock restocker) (Trial, error) {
	sku, err := onSale(ctx, env, name, restockUnits)
	if err != nil {
		return Trial{}, err
	}
	svc := order.NewService(env.DB, order.Guarded(stock.NewAtomic(env.DB), order.Rules{}), nil)
	reads, err := readStock(ctx, env, sku, 2)
	if err != nil {
		return Trial{}, err
	}
	for op, read := range reads {
		if err := restock(svc, sku, op, read); err != nil {
			return Trial{}, err
		}
	}
	a, err := audit.SKU(ctx, env.DB, sku, 0, nil)
	if err != nil {
		return Trial{}, err
	}
	want := restockUnits + len(reads)*restockBy
	lost := want - a.Available
	return Trial{Name: trial,
		Numbers:  map[string]int64{"units": restockUnits, "restocked": int64(len(reads) * restockBy), "available": int64(a.Available), "received": int64(a.Received), "lost": int64(lost)},
		Happened: fmt.Sprintf("%d units restocked twice by %d: %d available, %d lost; the movements add up to %d", restockUnits, restockBy, a.Available, lost, a.Received),
		Failed:   lost != 0}, nil
}
