package lua

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/stockguard/shop/internal/groupcommit"
	"github.com/stockguard/shop/internal/lua/redisstock"
	"github.com/stockguard/shop/internal/order"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// Reconciliation sets each SKU's Redis state from the database, and
// persists the reservations that dead processes left pending. It runs on
// one instance at a time (lock.Job); see docs/strategies.md.

// Reconciled is what setting one SKU's Redis state from the database found
// and did.
type Reconciled struct {
	SKU string `json:"sku"`
	// Rebuilt says why the state was built anew, in a new epoch: it was
	// missing, or of another epoch. Empty when it was kept.
	Rebuilt  string `json:"rebuilt,omitempty"`
	Epoch    int64  `json:"epoch"`
	Database int    `json:"database_available"`
	// Before is Redis's available before, if it had a state; After is
	// available after: Database less Pending.
	Before  *int `json:"redis_available_before"`
	After   int  `json:"redis_available"`
	Pending int  `json:"pending"` // reservations not in the database yet
}

// Fixed reports whether the state changed.
func (r Reconciled) Fixed() bool { return r.reason() != "" }

// reason is why the state changed, for the metrics: missing, epoch or
// drift; empty if it did not.
func (r Reconciled) reason() string {
	switch {
	case r.Before == nil || r.Rebuilt == "missing":
		return "missing"
	case r.Rebuilt != "":
		return "epoch"
	case *r.Before != r.After:
		return "drift"
	}
	return ""
}

func (r Reconciled) String() string {
	before := "none"
	if r.Before != nil {
		before = strconv.Itoa(*r.Before)
	}
	s := fmt.Sprintf("%s: database %d, pending %d, redis %s -> %d (epoch %d)", r.SKU, r.Database, r.Pending, before, r.After, r.Epoch)
	switch {
	case r.Rebuilt != "":
		s += ": rebuilt, " + r.Rebuilt
	case r.Fixed():
		s += ": fixed"
	default:
		s += ": ok"
	}
	return s
}

// states reads the Redis state of each of a SKU's buckets, names, and says
// why it must be built anew: "" when every bucket has a state of epoch.
func (l *Lua) states(ctx context.Context, names []string, epoch int64) ([]redisstock.State, string, error) {
	states := make([]redisstock.State, len(names))
	why := ""
	for i, name := range names {
		var err error
		if states[i], err = l.redis.State(ctx, name); err != nil {
			return nil, "", err
		}
		switch st := states[i]; {
		case !st.Exists:
			why = "missing"
		case st.Epoch != epoch && why == "":
			why = fmt.Sprintf("epoch %d, want %d", st.Epoch, epoch)
		}
	}
	return states, why, nil
}

// rebuild sets sku's Redis state from the database, in a new epoch if the
// state, of any bucket, is missing or of another epoch, under the stock
// row's lock: no batch commits, and no refund reads the epoch, until it is
// done. token fences a job's run; 0 for none.
func (l *Lua) rebuild(ctx context.Context, sku string, token int64) (Reconciled, error) {
	rec := Reconciled{SKU: sku}
	// Behind a queue of restocks on the stock row, the row lock may time
	// out (error 1205) before ctx ends: Transact tries again.
	err := stock.Transact(ctx, l.db, func(tx *gorm.DB) error {
		it, err := stock.Get(ctx, tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}), sku)
		if err != nil {
			return err
		}
		rec.Database = it.Available
		if rec.Epoch, err = stock.Epoch(tx, sku); err != nil {
			return err
		}
		names := l.bucketNames(sku)
		var states []redisstock.State
		if states, rec.Rebuilt, err = l.states(ctx, names, rec.Epoch); err != nil {
			return err
		}
		load := redisstock.Load{Token: token, Epoch: rec.Epoch, Limited: l.rules.Limit > 0, Dealt: l.buckets > 1}
		if rec.Rebuilt != "" {
			if rec.Epoch, err = stock.NextEpoch(tx, sku); err != nil {
				return err
			}
			load.Epoch = rec.Epoch
			// Keys that have orders are unknown to a state built anew.
			sold, err := order.Sold(tx, sku)
			if err != nil {
				return err
			}
			load.Lookup = &sold
		}
		if load.Limited {
			if load.Held, err = order.Held(tx, sku, nil); err != nil {
				return err
			}
		}
		done := make([][]redisstock.Settlement, len(names)) // each bucket's log entries whose orders the database has
		pending := make([]int, len(names))
		for i, st := range states {
			if done[i], err = persisted(tx, sku, st.Log); err != nil {
				return err
			}
			for _, r := range st.Log {
				if !slices.ContainsFunc(done[i], func(p redisstock.Settlement) bool { return p.ID == r.ID }) {
					pending[i] += r.Quantity
				}
			}
		}
		before, had := 0, true // had: every bucket had a state
		after := make([]int, len(names))
		for i, share := range shares(it.Available, pending) {
			load.Available, load.Persisted = share, done[i]
			ld, err := l.redis.Load(ctx, names[i], load)
			if err != nil {
				return err
			}
			if had = had && ld.Before != nil; had {
				before += *ld.Before
			}
			after[i] = ld.After
			rec.Pending += ld.Pending
		}
		if had {
			rec.Before = &before
		}
		if err := l.coverDeficits(ctx, names, load.Epoch, after); err != nil {
			return err
		}
		for _, a := range after {
			rec.After += a
		}
		return nil
	})
	if err != nil {
		return Reconciled{}, fmt.Errorf("order: rebuild %s: %w", sku, err)
	}
	l.setEpoch(sku, rec.Epoch)
	return rec, nil
}

// coverDeficits moves units to the buckets below zero from those that
// have some. A bucket whose buyers reserved between the read of its log
// and its load ends below zero: its share, dealt from that read, did not
// cover them. Left so, the buckets together would grant its deficit a
// second time, and the database refuse a buyer whom Redis had granted.
// The buckets that shares leaves below zero, their pending past the
// stock, are covered too, as far as any bucket has units, which only
// reservations refused meanwhile give back.
// The units are taken first and given after, so that no moment has more
// to grant than the database. after is each bucket's available, as
// loaded; it is updated.
func (l *Lua) coverDeficits(ctx context.Context, names []string, epoch int64, after []int) error {
	deficit := 0
	for _, a := range after {
		deficit -= min(a, 0)
	}
	moves := make([]int, len(after)) // each bucket's change
	taken := 0
	for i, a := range after {
		moves[i] = -min(max(a, 0), deficit-taken)
		taken -= moves[i]
	}
	for i, a := range after {
		if a < 0 {
			moves[i] = min(-a, taken) // no more than was taken
			taken -= moves[i]
		}
	}
	for _, give := range []bool{false, true} {
		for i, m := range moves {
			if m == 0 || (m > 0) != give {
				continue
			}
			if _, err := l.redis.Adjust(ctx, names[i], epoch, m, "", false); err != nil {
				return err
			}
			after[i] += m
		}
	}
	return nil
}

// persisted returns the reservations in log whose orders the database
// has, each with the answer its order is. A cart's line is its own row of sku, but only the cart's
// head row carries the Idempotency-Key: a line's key is its head's. A
// cart's line that the database has, but whose saga has not ended it yet
// (CartDone), must count as persisted: counted as pending too, its units
// would be taken twice from what Redis may sell, and a buyer told sold out
// while the database still has them.
func persisted(tx *gorm.DB, sku string, log []redisstock.Reservation) ([]redisstock.Settlement, error) {
	if len(log) == 0 {
		return nil, nil
	}
	users := make([]string, len(log))
	for i, r := range log {
		users[i] = r.UserID
	}
	have, err := order.KeysOf(tx, sku, users)
	if err != nil {
		return nil, err
	}
	var done []redisstock.Settlement
	for _, r := range log {
		if o, ok := have[order.UserKey{User: r.UserID, Key: r.Key}]; ok {
			answer, _ := order.Stored(order.Answer{Order: o})
			done = append(done, redisstock.Settlement{Reservation: r, How: redisstock.Persisted, Answer: answer})
		}
	}
	return done, nil
}

// Report is what one run of Reconcile found and did.
type Report struct {
	// Claimed counts the reservations taken over from dead processes,
	// Persisted those of them now in the database (the rest were refused
	// or were replays, and gave their units back).
	Claimed   int          `json:"claimed"`
	Persisted int          `json:"persisted"`
	SKUs      []Reconciled `json:"skus"`
}

// Fixed reports whether the run claimed or changed anything.
func (r Report) Fixed() bool {
	return r.Claimed > 0 || slices.ContainsFunc(r.SKUs, Reconciled.Fixed)
}

// String is the report as `shop reconcile` prints it, a line per SKU.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "claimed %d reservations pending past the claim timeout, %d of them persisted\n", r.Claimed, r.Persisted)
	for _, s := range r.SKUs {
		fmt.Fprintln(&b, s)
	}
	return b.String()
}

// Reconcile is the job that runs on one process at a time: it persists the
// reservations pending for longer than the claim timeout, left by a dead
// process, and then sets the Redis state of every SKU sold through lua from
// the database. token is the run's fencing token: a run whose lease was
// lost, and that a later run has overtaken, changes no state (ErrFenced).
func (l *Lua) Reconcile(ctx context.Context, token int64) (Report, error) {
	var rep Report
	skus, err := l.redis.SKUs(ctx)
	if err != nil {
		return rep, err
	}
	for _, name := range skus { // a SKU, or a bucket of one
		epoch, claimed, err := l.redis.Claim(ctx, name, l.idle)
		if err != nil {
			return rep, err
		}
		var lines []redisstock.Reservation
		claimed = slices.DeleteFunc(claimed, func(r redisstock.Reservation) bool {
			if r.Saga != "" {
				lines = append(lines, r)
			}
			return r.Saga != ""
		})
		l.giveBackClaimed(ctx, name, lines)
		persisted := l.persist(ctx, name, epoch, claimed)
		rep.Claimed += len(claimed)
		rep.Persisted += persisted
		metrics.LuaClaimed.WithLabelValues("persisted").Add(float64(persisted))
		metrics.LuaClaimed.WithLabelValues("released").Add(float64(len(claimed) - persisted))
	}
	sold, err := stock.OnSale(ctx, l.db)
	if err != nil {
		return rep, fmt.Errorf("order: reconcile: %w", err)
	}
	pending := 0
	for _, sku := range sold {
		rec, err := l.rebuild(ctx, sku, token)
		if err != nil {
			return rep, err
		}
		rep.SKUs = append(rep.SKUs, rec)
		pending += rec.Pending
		if reason := rec.reason(); reason != "" {
			metrics.LuaCorrections.WithLabelValues(reason).Inc()
		}
	}
	metrics.LuaPending.Set(float64(pending))
	return rep, nil
}

// persist puts reservations claimed from bucket, a SKU or a bucket of one,
// through the writer, as their buyers' own would have been, tried again
// until the database takes them, and counts those now in the database.
func (l *Lua) persist(ctx context.Context, bucket string, epoch int64, claimed []redisstock.Reservation) int {
	sku, _ := redisstock.SplitBucket(bucket)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, r := range claimed {
		wg.Go(func() {
			_, replayed, err := l.send(&groupcommit.Request[reservation]{Ctx: ctx, Epoch: epoch,
				Meta:  reservation{entry: r.ID, bucket: bucket},
				Order: order.PlaceRequest{SKU: sku, UserID: r.UserID, Quantity: r.Quantity, IdempotencyKey: r.Key}})
			if err == nil && !replayed {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n
}
