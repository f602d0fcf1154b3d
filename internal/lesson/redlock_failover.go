package lesson

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/stock"
)

func init() {
	register(Lesson{Number: 7, Name: "redlock-failover", Seed: "seed 004",
		Claim:    "Redlock on independent masters stays exclusive while a majority is up",
		Setup:    "3 masters, 1 unit. A holds the lock on masters 0 and 1 (master 2 is held by a leftover lock); the leftover goes; master 0 restarts empty, with no persistence; B asks; then B and A each sell the unit they read",
		Takeaway: "a master that restarts empty lets Redlock grant the lock twice: run masters with persistence (appendfsync always) or keep a restarted one out for a TTL, and fence every write, so that the database refuses the older holder",
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return failover(ctx, env, "mistake", "writes trust the lock: read, then write", func(sku string, _ *lock.Lease, read int, who string) error {
				if read < 1 {
					return stock.ErrSoldOut
				}
				return WriteUnfenced(ctx, env.DB, sku, read-1, who)
			})
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			return failover(ctx, env, "fix", "writes carry the lease's fencing token (stock.Fenced)", func(sku string, l *lock.Lease, _ int, who string) error {
				return stock.Fenced(ctx, env.DB, sku, -1, l.Token(), ordered(sku, who))
			})
		},
	})
}

// failoverTTL is long enough that A's lease outlives the steps of the
// scenario before its watchdog finds the majority gone, on a loaded
// machine too; failoverNodeTimeout lets a slow master still answer.
const (
	failoverTTL         = 5 * time.Second
	failoverNodeTimeout = time.Second
)

// failover runs the scenario of redlock-failover; write sells one unit as
// the holder of l, who read read.
func failover(ctx context.Context, env *Env, trial, name string, write func(sku string, l *lock.Lease, read int, who string) error) (Trial, error) {
	if len(env.Masters) < 3 {
		return Trial{}, fmt.Errorf("lesson: redlock-failover needs 3 masters, got %d", len(env.Masters))
	}
	sku, err := onSale(ctx, env, "redlock-failover-"+trial, 1)
	if err != nil {
		return Trial{}, err
	}
	opts := &lock.RedisOptions{TTL: failoverTTL, NodeTimeout: failoverNodeTimeout, Prefix: env.Prefix + "redlock-failover:" + trial + ":"}
	var nodes []lock.RedisClient
	for _, m := range env.Masters[:3] {
		nodes = append(nodes, m.Client)
	}
	// A and B are two processes: a Locker queues its own process's
	// holders, and would keep B waiting behind A without asking a master.
	redlockA, err := lock.NewRedlock(nodes, opts)
	if err != nil {
		return Trial{}, err
	}
	redlockB, err := lock.NewRedlock(nodes, opts)
	if err != nil {
		return Trial{}, err
	}
	// A leftover lock on master 2 alone keeps A to masters 0 and 1.
	leftover, err := lock.NewRedis(env.Masters[2].Client, opts).TryAcquire(ctx, sku)
	if err != nil {
		return Trial{}, fmt.Errorf("the leftover lock on master 2: %w", err)
	}
	a, err := tryHard(ctx, redlockA, sku)
	if err != nil {
		leftover.Release(ctx)
		return Trial{}, fmt.Errorf("A: %w", err)
	}
	defer a.Release(context.WithoutCancel(ctx))
	if err := leftover.Release(ctx); err != nil {
		return Trial{}, err
	}
	readA, err := available(ctx, env, sku)
	if err != nil {
		return Trial{}, err
	}
	if err := env.Masters[0].RestartEmpty(ctx); err != nil {
		return Trial{}, err
	}
	b, err := tryHard(ctx, redlockB, sku)
	twice := err == nil && a.Err() == nil // A still believes it holds the lock
	if errors.Is(err, lock.ErrLocked) {
		return Trial{}, errors.New("lesson: B did not get the lock; the scenario did not happen")
	}
	if err != nil {
		return Trial{}, fmt.Errorf("B: %w", err)
	}
	defer b.Release(context.WithoutCancel(ctx))
	readB, err := available(ctx, env, sku)
	if err != nil {
		return Trial{}, err
	}
	errB := write(sku, b, readB, "B")
	errA := write(sku, a, readA, "A")
	for _, err := range []error{errA, errB} {
		if err != nil && !errors.Is(err, stock.ErrFenced) && !errors.Is(err, stock.ErrSoldOut) {
			return Trial{}, err
		}
	}
	au, err := audit.SKU(ctx, env.DB, sku, 0, nil)
	if err != nil {
		return Trial{}, err
	}
	t := auditTrial(name, au)
	t.Numbers["holders_at_once"] = 1 + b2i(twice)
	t.Numbers["token_a"], t.Numbers["token_b"] = a.Token(), b.Token()
	t.Numbers["a_refused"] = b2i(errors.Is(errA, stock.ErrFenced))
	t.Happened = fmt.Sprintf("A (token %d) and B (token %d) held the lock at once: %v; %s; A's write refused: %v",
		a.Token(), b.Token(), twice, t.Happened, errors.Is(errA, stock.ErrFenced))
	return t, nil
}

// tryHard tries the lock a few times: a round that a slow master missed is
// not a refusal.
func tryHard(ctx context.Context, l lock.Locker, name string) (*lock.Lease, error) {
	for range 4 {
		lease, err := l.TryAcquire(ctx, name)
		if !errors.Is(err, lock.ErrLocked) {
			return lease, err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, lock.ErrLocked
}
