package order

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// Lua is the fast path: Redis decides, the database records.
//
//  1. One Lua script (stock.RedisStock.Reserve) checks the SKU's Redis
//     state, its stock and the user's limit, takes the units and appends the
//     reservation to the SKU's stream, pending for this process: one round
//     trip.
//  2. The group-commit writer of batched persists the reservations, one
//     transaction per batch: a conditional UPDATE by the sum, so that the
//     database refuses rather than oversells, and a multi-row INSERT, where
//     the unique (user_id, idempotency_key) index makes a second persist of
//     one reservation a replay.
//  3. After the COMMIT, the reservations are acknowledged and deleted from
//     the stream; a refused one gives its units back to Redis and its buyer
//     hears sold out. Only then is the buyer answered: an order is
//     acknowledged once it is in the database.
//
// The stream is the recovery log. Reservations that a dead process left
// pending are claimed by another (Reconcile) and persisted; the buyer's
// retry under the same key gets the order. A Redis that lost a SKU's state
// (restarted empty) or holds another epoch's (restored from an old
// snapshot, or a sale reset since) does not sell it: the state is first
// built again from the database, less the reservations still in the stream
// that the database does not have. Reconcile sets every SKU's state from
// the database the same way, exactly, while holding the SKU's stock row.
type Lua struct {
	db     *gorm.DB
	redis  *stock.RedisStock
	w      *writer
	single stock.Guard // the database side of refunds
	reads  *firstReads
	limit  int
	idle   time.Duration

	rebuilding chan struct{} // one rebuild at a time in this process
	mu         sync.Mutex
	epochs     map[string]int64 // each SKU's epoch, as last read or built
	fixing     map[string]bool
}

// LuaOptions configure Lua; nil is valid.
type LuaOptions struct {
	Prefix       string // of every Redis key
	PerUserLimit int    // 0: none; the same as the Service's
	// ClaimIdle is how long a reservation stays pending before Reconcile
	// takes it from its process as dead. It must outlast the longest a
	// live process takes to persist one. Default 30s.
	ClaimIdle time.Duration
}

// NewLua returns the fast path on gdb and rdb.
func NewLua(gdb *gorm.DB, rdb redis.UniversalClient, opts *LuaOptions) *Lua {
	var o LuaOptions
	if opts != nil {
		o = *opts
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = 30 * time.Second
	}
	l := &Lua{db: gdb, redis: stock.NewRedisStock(rdb, o.Prefix), w: newWriter(gdb, "lua"), single: stock.NewAtomic(gdb), reads: newFirstReads(gdb),
		limit: o.PerUserLimit, idle: o.ClaimIdle, rebuilding: make(chan struct{}, 1),
		epochs: make(map[string]int64), fixing: make(map[string]bool)}
	l.w.settle = l.settle
	for _, result := range []string{"persisted", "released"} {
		metrics.LuaClaimed.WithLabelValues(result)
	}
	for _, reason := range []string{"missing", "epoch", "drift"} {
		metrics.LuaCorrections.WithLabelValues(reason)
	}
	return l
}

// redisTimeout bounds the Redis calls made after a commit, which run even
// when the buyer's ctx has ended.
const redisTimeout = 5 * time.Second

// place reserves in Redis, then persists through the writer. Redis's
// refusals are final (stock.RedisStock.Reserve); the database's are checked
// against the key's order.
func (l *Lua) place(ctx context.Context, r PlaceRequest, limit int) (Order, bool, error) {
	res := stock.Reservation{UserID: r.UserID, Key: r.IdempotencyKey, Quantity: r.Quantity}
	checked := false
	for attempt := 0; ; attempt++ {
		epoch, err := l.epoch(ctx, r.SKU)
		if err != nil {
			return Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, err)
		}
		id, err := l.redis.Reserve(ctx, r.SKU, res, stock.Terms{Epoch: epoch, Limit: limit, Checked: checked, TakeOver: l.idle})
		switch {
		case err == nil:
			o, replayed, err := l.w.submit(&pending{ctx: ctx, r: r, limit: limit, entry: id, epoch: epoch})
			return l.reads.checkRefusal(ctx, r, o, replayed, err)
		case errors.Is(err, stock.ErrCheck) && !checked:
			// The key may have an order that Redis does not know of: find
			// it before taking stock that a new buyer then misses.
			if o, found, err := replayOr(ctx, l.db, r, nil); found || err != nil {
				return o, found, err
			}
			checked = true
		case errors.Is(err, stock.ErrStale) && attempt < 3:
			if err := l.refresh(ctx, r.SKU, epoch); err != nil {
				return Order{}, false, fmt.Errorf("order: place: %w", err)
			}
		case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrInProgress):
			return Order{}, false, fmt.Errorf("order: place: %w", err)
		case errors.Is(err, stock.ErrKeyReused):
			return Order{}, false, fmt.Errorf("order: place: %w: %w", ErrKeyReused, err)
		case errors.Is(err, stock.ErrOverLimit):
			return Order{}, false, fmt.Errorf("order: place: %w: %w", ErrLimitReached, err)
		default: // Redis is down, or the state keeps changing: nothing was taken
			return Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, err)
		}
	}
}

// epoch returns the SKU's epoch as this process last saw it, or reads it.
func (l *Lua) epoch(ctx context.Context, sku string) (int64, error) {
	l.mu.Lock()
	e, ok := l.epochs[sku]
	l.mu.Unlock()
	if ok {
		return e, nil
	}
	e, err := readEpoch(l.db.WithContext(ctx), sku)
	if err != nil {
		return 0, err
	}
	l.setEpoch(sku, e)
	return e, nil
}

func (l *Lua) setEpoch(sku string, e int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epochs[sku] = e
}

// refresh builds the SKU's state again, found stale under epoch seen,
// unless another buyer of this process has since.
func (l *Lua) refresh(ctx context.Context, sku string, seen int64) error {
	select {
	case l.rebuilding <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", stock.ErrBusy, context.Cause(ctx))
	}
	defer func() { <-l.rebuilding }()
	if e, err := l.epoch(ctx, sku); err == nil && e != seen {
		return nil
	}
	_, err := l.rebuild(ctx, sku, 0)
	if err != nil && !errors.Is(err, stock.ErrNotFound) {
		return fmt.Errorf("%w: %w", stock.ErrBusy, err)
	}
	return err
}

// settle runs once a batch has committed: its reservations are in the
// database now, or were refused, and leave the stream.
func (l *Lua) settle(sku string, batch []*pending, answers []placed) {
	rs := make([]stock.Reservation, len(batch))
	how := make([]stock.Settled, len(batch))
	refused := false
	for i, p := range batch {
		rs[i] = stock.Reservation{ID: p.entry, UserID: p.r.UserID, Key: p.r.IdempotencyKey, Quantity: p.r.Quantity}
		// A replay gives its units back: the key's order took units of its
		// own. Should that order be this very reservation's (its commit's
		// answer was lost), Redis then holds a unit more than the database,
		// which refuses it, and reconcile corrects it: too many in Redis,
		// never too few.
		switch a := answers[i]; {
		case a.err == nil && a.replayed:
			how[i] = stock.Replayed
		case a.err == nil:
			how[i] = stock.Kept
		default:
			how[i] = stock.Released
			refused = refused || errors.Is(a.err, stock.ErrSoldOut) || errors.Is(a.err, ErrLimitReached)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	// Should it fail, they stay pending and are claimed and settled later.
	_, _ = l.redis.Settle(ctx, sku, rs, how, l.limit > 0)
	if refused {
		// Redis granted what the database refused: its state is stale.
		l.fix(sku)
	}
}

// fix builds the SKU's state again in the background, once at a time.
func (l *Lua) fix(sku string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fixing[sku] {
		return
	}
	l.fixing[sku] = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
		defer cancel()
		_, _ = l.rebuild(ctx, sku, 0) // Reconcile tries again if it fails
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.fixing, sku)
	}()
}

// Adjust implements the strategy for orders without an Idempotency-Key,
// which the HTTP API never sends, and refunds: the change commits in the
// database, then goes to Redis.
func (l *Lua) Adjust(ctx context.Context, sku string, delta int, fn stock.Fn) error {
	return l.adjust(ctx, sku, delta, "", only(fn))
}

// refund returns o's units, to the database and then to Redis, and takes
// them off what its user holds there.
func (l *Lua) refund(ctx context.Context, o Order, fn stock.Fn) error {
	return l.adjust(ctx, o.SKU, o.Quantity, o.UserID, only(fn))
}

// restock implements SetStock's change of an existing SKU: set changes
// the stock in the database, under the stock row's lock, and Redis then
// takes the same change, in the same epoch, without a rebuild.
func (l *Lua) restock(ctx context.Context, sku string, set func(tx *gorm.DB) (int, error)) error {
	return l.adjust(ctx, sku, 0, "", set)
}

// only is fn as adjust takes it: it changes no stock beyond the delta.
func only(fn stock.Fn) func(tx *gorm.DB) (int, error) {
	return func(tx *gorm.DB) (int, error) { return 0, fn(tx) }
}

// adjust applies delta, and whatever more fn changes of the stock in the
// same transaction, to the database and then to Redis.
func (l *Lua) adjust(ctx context.Context, sku string, delta int, user string, fn func(tx *gorm.DB) (int, error)) error {
	var epoch int64
	change := delta // what reaches Redis: the last attempt's, should the transaction run again
	err := l.single.Adjust(ctx, sku, delta, func(tx *gorm.DB) error {
		more, err := fn(tx)
		if err != nil {
			return err
		}
		change = delta + more
		// Read under the stock row's lock, which a rebuild takes too: a
		// state of this epoch was built without this change, one of a
		// later epoch with it. So the change reaches Redis exactly once.
		epoch, err = readEpoch(tx, sku)
		return err
	})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	if _, err := l.redis.Adjust(rctx, sku, epoch, change, user, l.limit > 0); err != nil {
		l.fix(sku) // the database has the change; Redis gets it from there
	}
	return nil
}

// saleEpoch is one row of stock_epochs.
type saleEpoch struct {
	SKU   string `gorm:"column:sku;primaryKey"`
	Epoch int64
}

func (saleEpoch) TableName() string { return "stock_epochs" }

func readEpoch(tx *gorm.DB, sku string) (int64, error) {
	var e int64
	err := tx.Raw(`SELECT COALESCE(MAX(epoch), 0) FROM stock_epochs WHERE sku = ?`, sku).Row().Scan(&e)
	return e, err
}

// newEpoch moves the SKU to the epoch after from.
func newEpoch(tx *gorm.DB, sku string, from int64) (int64, error) {
	e := saleEpoch{SKU: sku, Epoch: from + 1}
	err := tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "sku"}},
		DoUpdates: clause.AssignmentColumns([]string{"epoch"}),
	}).Create(&e).Error
	return e.Epoch, err
}

// newSale implements saleKeeper: a new epoch, in the transaction that sets
// the SKU up, so that no state built before it sells again.
func (l *Lua) newSale(tx *gorm.DB, sku string) error {
	e, err := readEpoch(tx, sku)
	if err == nil {
		_, err = newEpoch(tx, sku, e)
	}
	return err
}

// forget implements saleKeeper: it drops the SKU's Redis state.
func (l *Lua) forget(ctx context.Context, sku string) error {
	l.mu.Lock()
	delete(l.epochs, sku)
	l.mu.Unlock()
	return l.redis.Forget(ctx, sku)
}

var (
	_ saleKeeper = (*Lua)(nil)
	_ restocker  = (*Lua)(nil)
	_ refunder   = (*Lua)(nil)
	_ placer     = (*Lua)(nil)
)

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

// rebuild sets sku's Redis state from the database, in a new epoch if the
// state is missing or of another epoch, under the stock row's lock: no
// batch commits, and no refund reads the epoch, until it is done. token
// fences a job's run; 0 for none.
func (l *Lua) rebuild(ctx context.Context, sku string, token int64) (Reconciled, error) {
	rec := Reconciled{SKU: sku}
	err := l.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		it, err := stock.Get(ctx, tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}), sku)
		if err != nil {
			return err
		}
		rec.Database = it.Available
		if rec.Epoch, err = readEpoch(tx, sku); err != nil {
			return err
		}
		st, err := l.redis.State(ctx, sku)
		if err != nil {
			return err
		}
		switch {
		case !st.Exists:
			rec.Rebuilt = "missing"
		case st.Epoch != rec.Epoch:
			rec.Rebuilt = fmt.Sprintf("epoch %d, want %d", st.Epoch, rec.Epoch)
		}
		load := stock.Load{Token: token, Epoch: rec.Epoch, Available: it.Available, Limited: l.limit > 0}
		if rec.Rebuilt != "" {
			if rec.Epoch, err = newEpoch(tx, sku, rec.Epoch); err != nil {
				return err
			}
			load.Epoch = rec.Epoch
			// Keys that have orders are unknown to a state built anew.
			var sold bool
			if err := tx.Raw(`SELECT EXISTS (SELECT 1 FROM orders WHERE sku = ?)`, sku).Row().Scan(&sold); err != nil {
				return err
			}
			load.Lookup = &sold
		}
		if load.Persisted, err = persisted(tx, sku, st.Log); err != nil {
			return err
		}
		if load.Limited {
			var rows []purchase
			if err := tx.Raw(`SELECT * FROM user_purchases WHERE sku = ?`, sku).Scan(&rows).Error; err != nil {
				return err
			}
			load.Held = make(map[string]int, len(rows))
			for _, p := range rows {
				load.Held[p.UserID] = p.Units
			}
		}
		ld, err := l.redis.Load(ctx, sku, load)
		if err != nil {
			return err
		}
		rec.Before, rec.After, rec.Pending = ld.Before, ld.After, ld.Pending
		return nil
	})
	if err != nil {
		return Reconciled{}, fmt.Errorf("order: rebuild %s: %w", sku, err)
	}
	l.setEpoch(sku, rec.Epoch)
	return rec, nil
}

// persisted returns the ids of the reservations in log whose orders the
// database has.
func persisted(tx *gorm.DB, sku string, log []stock.Reservation) ([]string, error) {
	if len(log) == 0 {
		return nil, nil
	}
	users := make([]string, len(log))
	for i, r := range log {
		users[i] = r.UserID
	}
	var rows []Order
	if err := tx.Raw(`SELECT user_id, idempotency_key FROM orders WHERE sku = ? AND user_id IN ?`, sku, users).Scan(&rows).Error; err != nil {
		return nil, err
	}
	have := make(map[userKey]bool, len(rows))
	for _, o := range rows {
		if o.IdempotencyKey != nil {
			have[userKey{o.UserID, *o.IdempotencyKey}] = true
		}
	}
	var ids []string
	for _, r := range log {
		if have[userKey{r.UserID, r.Key}] {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
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
	for _, sku := range skus {
		epoch, claimed, err := l.redis.Claim(ctx, sku, l.idle)
		if err != nil {
			return rep, err
		}
		persisted := l.persist(ctx, sku, epoch, claimed)
		rep.Claimed += len(claimed)
		rep.Persisted += persisted
		metrics.LuaClaimed.WithLabelValues("persisted").Add(float64(persisted))
		metrics.LuaClaimed.WithLabelValues("released").Add(float64(len(claimed) - persisted))
	}
	var sold []string
	err = l.db.WithContext(ctx).Raw(`SELECT e.sku FROM stock_epochs e JOIN stock_items s ON s.sku = e.sku ORDER BY e.sku`).Scan(&sold).Error
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

// persist puts claimed reservations through the writer, as their buyers'
// own would have been, and counts those now in the database.
func (l *Lua) persist(ctx context.Context, sku string, epoch int64, claimed []stock.Reservation) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, r := range claimed {
		wg.Go(func() {
			_, replayed, err := l.w.submit(&pending{ctx: ctx, limit: l.limit, entry: r.ID, epoch: epoch,
				r: PlaceRequest{SKU: sku, UserID: r.UserID, Quantity: r.Quantity, IdempotencyKey: r.Key}})
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
