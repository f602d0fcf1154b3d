package lesson

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/lincheck"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
	"github.com/stockguard/shop/internal/strategy"
)

// The sale of linearizability: its units, its buyers, sent at once round
// robin over the instances; how many sales of local it tries before it
// gives up on the race; and how long the checker may search.
const (
	linUnits     = 20
	linBuyers    = 200
	linInstances = 3
	linSales     = 20
	linCheckFor  = 10 * time.Second
)

func init() {
	register(Lesson{Number: 18, Name: "linearizability", Seed: "seed 002",
		Claim: "a sale is checked by its totals once it is over: orders against stock, nothing oversold; a lock in each process keeps its buyers apart",
		Setup: fmt.Sprintf("%d units, %d buyers at once, round robin over %d instances of the shop; every answer is recorded with its call and return times, "+
			"then the final state is read from the database, and the history is checked against a sequential model of the shop; "+
			"local's race may not show in a sale, so it is sold again, up to %d sales, until the checker catches it",
			linUnits, linBuyers, linInstances, linSales),
		Takeaway: "check every answer against a model, not only the totals: a sale is linearizable when one order of its operations, each taken at a point " +
			"between its call and its answer, explains every answer and the final state. A mutex per process is not; a conditional UPDATE (atomic) is",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return checkedSales(ctx, env, "local", "local: a mutex in each instance", linSales)
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			return checkedSales(ctx, env, "atomic", "atomic: UPDATE … WHERE available >= 1", 1)
		},
	})
}

// checkedSales sells through the strategy called name, at most sales
// times, until the checker rejects a sale's history, and writes the last
// sale's history and its page in the lesson's directory. A sale that the
// checker gives no verdict on is an error: neither failed nor held.
func checkedSales(ctx context.Context, env *Env, name, trial string, sales int) (Trial, error) {
	shops, err := instances(env, name)
	if err != nil {
		return Trial{}, err
	}
	var (
		ops  []history.Op
		r    lincheck.Result
		sale int
	)
	for sale = 1; sale <= sales; sale++ {
		sku := fmt.Sprintf("%slinearizability-%s-%d", env.Prefix, name, sale)
		if ops, err = recordedSale(ctx, env, shops, sku); err != nil {
			return Trial{}, err
		}
		r = lincheck.Check(ops, linCheckFor)
		if r.Unknown {
			return Trial{}, fmt.Errorf("sale %d of %s: %s", sale, name, r.FirstViolation)
		}
		if !r.Linearizable {
			break
		}
	}
	sale = min(sale, sales)
	files, err := writeHistory(env, name, ops, r)
	if err != nil {
		return Trial{}, err
	}
	return historyTrial(trial, sale, sales, ops, r, files), nil
}

// instances builds the strategy called name as the app builds it, once
// per instance: each with its own state, a local mutex of its own among
// it, on the lesson's database.
func instances(env *Env, name string) ([]*order.Service, error) {
	s, err := strategy.Lookup(name)
	if err != nil {
		return nil, err
	}
	b := &backend.Backends{DB: env.DB, Redis: env.Redis}
	shops := make([]*order.Service, linInstances)
	for i := range shops {
		p, err := s.Build(b, config.Config{})
		if err != nil {
			return nil, err
		}
		shops[i] = order.NewService(env.DB, p, nil)
	}
	return shops, nil
}

// recordedSale puts linUnits of sku on sale, releases linBuyers at once
// through a start gate, round robin over the shops, and returns the
// sale's history: the stock set, every buyer's answer, and the final
// state read from the database.
func recordedSale(ctx context.Context, env *Env, shops []*order.Service, sku string) ([]history.Op, error) {
	rec := history.NewRecorder()
	if err := shops[0].DeleteStock(ctx, sku); err != nil && !errors.Is(err, stock.ErrNotFound) {
		return nil, err
	}
	call := rec.Now()
	if _, err := shops[0].SetStock(ctx, sku, linUnits); err != nil {
		return nil, err
	}
	rec.Add(history.Op{Client: rec.Client(), Kind: history.StockSet, Items: []history.Item{{SKU: sku, Quantity: linUnits}},
		Call: call, Return: rec.Now(), Answer: history.OK})
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range linBuyers {
		wg.Go(func() {
			<-gate
			user, key := fmt.Sprint("buyer-", i), fmt.Sprint("key-", i)
			op := history.Op{Client: rec.Client(), Kind: history.Order, User: user, Key: key,
				Items: []history.Item{{SKU: sku, Quantity: 1}}, Call: rec.Now()}
			o, _, err := shops[i%len(shops)].Place(ctx, order.PlaceRequest{SKU: sku, UserID: user, Quantity: 1, IdempotencyKey: key})
			op.Return, op.Answer, op.Order = rec.Now(), answerOf(err), o.ID
			if op.Answer == history.SoldOut {
				op.Short = []string{sku}
			}
			rec.Add(op)
		})
	}
	close(gate)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	call = rec.Now()
	final, err := audit.Final(ctx, env.DB, []string{sku}, rec.Now)
	if err != nil {
		return nil, err
	}
	rec.AddFinal(call, final)
	return rec.Ops(), nil
}

// answerOf is what the API would have told a buyer whose order ended in
// err.
func answerOf(err error) history.Answer {
	switch {
	case err == nil:
		return history.Ordered
	case errors.Is(err, stock.ErrSoldOut):
		return history.SoldOut
	case errors.Is(err, order.ErrLimitReached):
		return history.Limit
	case errors.Is(err, stock.ErrBusy), errors.Is(err, stock.ErrFenced), errors.Is(err, context.DeadlineExceeded):
		return history.Busy
	}
	return history.Error
}

// writeHistory writes a sale's operations, as JSON lines, and the
// checker's page of them in the lesson's directory, and returns their
// paths.
func writeHistory(env *Env, name string, ops []history.Op, r lincheck.Result) ([]string, error) {
	dir, err := env.dir()
	if err != nil {
		return nil, err
	}
	page, jsonl := filepath.Join(dir, name+".html"), filepath.Join(dir, name+".jsonl")
	if err := r.VisualizePath(page); err != nil {
		return nil, err
	}
	return []string{page, jsonl}, history.WriteFile(jsonl, ops)
}

// historyTrial is the trial of sales sold, of at most most, until the
// checker rejected one or every one was accepted: its verdict, and the
// figures of the last sale's final state.
func historyTrial(name string, sales, most int, ops []history.Op, r lincheck.Result, files []string) Trial {
	final := ops[len(ops)-1].Final
	linearizable := map[bool]int64{false: 0, true: 1}[r.Linearizable]
	t := Trial{Name: name,
		Numbers: map[string]int64{"units": linUnits, "buyers": linBuyers, "sales": int64(sales), "operations": int64(r.Ops),
			"check_ms": r.CheckMS, "linearizable": linearizable, "orders": int64(len(final.Orders)), "left": int64(final.Stock[0].Available)},
		Failed: !r.Linearizable}
	verdict := fmt.Sprintf("%d operations, checked in %d ms", r.Ops, r.CheckMS)
	switch {
	case r.Linearizable && sales > 1:
		t.Happened = fmt.Sprintf("every one of %d sales was linearizable: the race did not show", sales)
	case r.Linearizable:
		t.Happened = "linearizable: every answer explained, " + verdict
	case most > 1:
		t.Happened = fmt.Sprintf("NOT linearizable, in sale %d of at most %d: %s", sales, most, verdict)
	default:
		t.Happened = "NOT linearizable: " + verdict
	}
	if !r.Linearizable {
		t.Rows = append(t.Rows, "first impossible answer: "+r.FirstViolation)
	}
	t.Rows = append(t.Rows, fmt.Sprintf("sale %d: %d orders for %d units, %d left", sales, len(final.Orders), linUnits, final.Stock[0].Available),
		"the history's page: "+files[0], "its operations:     "+files[1])
	return t
}
