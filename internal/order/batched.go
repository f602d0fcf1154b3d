package order

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/backoff"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// Batched is group commit: an instance's buyers of one SKU share one
// transaction. One hot row is a queue: one order per transaction holds the
// row lock through each commit's log flush, so a SKU sells at the rate of
// flushes. Batched pays one flush for a batch: while one batch commits, the
// next gathers, and each transaction
//
//  1. locks the stock row and reads what is left;
//  2. looks up the batch's Idempotency-Keys, so that a key that already has
//     an order is that buyer's replay (or ErrKeyReused), never the batch's
//     failure, and two buyers with one key in a batch get one order;
//  3. grants buyers in arrival order as far as the stock and the per-user
//     limit go; the rest are sold out or over the limit;
//  4. takes the granted units with one conditional UPDATE by the sum (the
//     database still refuses to go below zero), inserts every granted
//     order in one multi-row INSERT, and the users' holdings in one upsert;
//  5. commits, and answers each buyer on its own.
//
// Sold out is answered without queuing. A buyer reads the stock with a
// plain read, which takes no lock, unless its SKU's writer runs and the last
// batch left stock: then the buyer queues at once, and the batch decides.
// A batch that leaves none answers every buyer still queued sold out.
//
// A deadlock or lock-wait timeout runs the batch again while any of its
// buyers still waits. A buyer whose deadline passes first is answered busy;
// if its batch commits after all, its retry with the same key finds the
// order. A request without an Idempotency-Key, which the HTTP API never
// sends, cannot be told apart in a batch and takes one transaction of its
// own. Refunds, one per transaction, take the row like atomic.
type Batched struct {
	db     *gorm.DB
	single stock.Guard // refunds, and orders without a key
	w      *writer
	reads  *firstReads
}

// writer is the group-commit writer of batched and lua: it queues an
// instance's buyers per SKU and commits each SKU's batches one after
// another, one transaction each (see Batched for what the transaction
// does).
type writer struct {
	db   *gorm.DB
	name string // the strategy's, in the metrics
	// settle, if set, runs once a batch has committed, before its buyers
	// are answered: lua acknowledges its reservations there.
	settle func(sku string, batch []*pending, answers []placed)

	mu   sync.Mutex
	skus map[string]*line // a SKU is here while its writer runs

	idsOnce sync.Once
	ids     bool // see exactIDs
}

func newWriter(gdb *gorm.DB, name string) *writer {
	return &writer{db: gdb, name: name, skus: make(map[string]*line)}
}

// line is one SKU's waiting buyers, and what its last batch left.
type line struct {
	queue []*pending
	// stocked: the last batch committed and left stock. Until a first
	// batch has, or once one leaves none, buyers read the stock first.
	stocked bool
}

// maxBatch bounds a batch. The group-commit loop of `shop bench`
// (sql-batched) sells tens of thousands of orders a second at 100 orders a
// transaction on a 2-core machine, far beyond what one instance's HTTP stack
// brings it; a larger batch only makes each commit, and every buyer in it,
// wait longer.
const maxBatch = 128

// pending is one buyer waiting for its batch.
type pending struct {
	ctx   context.Context
	r     PlaceRequest
	limit int
	done  chan placed // buffered: the writer never waits for the buyer
	// entry is the reservation's id in lua's stream, and epoch the epoch
	// of the Redis state it was taken from; empty and 0 for batched.
	entry string
	epoch int64
}

type placed struct {
	o        Order
	replayed bool
	err      error
}

// NewBatched returns the group-commit strategy on gdb.
func NewBatched(gdb *gorm.DB) *Batched {
	return &Batched{db: gdb, single: stock.NewQueued(gdb, stock.NewAtomic(gdb)), w: newWriter(gdb, "batched"), reads: newFirstReads(gdb)}
}

// Adjust implements the strategy for what does not batch: refunds, and
// orders without an Idempotency-Key.
func (b *Batched) Adjust(ctx context.Context, sku string, delta int, fn stock.Fn) error {
	return b.single.Adjust(ctx, sku, delta, fn)
}

// place queues r for the SKU's next batch and waits for its answer.
func (b *Batched) place(ctx context.Context, r PlaceRequest, limit int) (Order, bool, error) {
	if !b.stocked(r.SKU) {
		// Sold out is answered at once, by a read that takes no lock.
		if o, found, err := b.reads.first(ctx, r); found || err != nil {
			return o, found, err
		}
	}
	o, replayed, err := b.w.submit(&pending{ctx: ctx, r: r, limit: limit})
	return b.reads.checkRefusal(ctx, r, o, replayed, err)
}

// submit queues p for its SKU's next batch and waits for its answer.
func (w *writer) submit(p *pending) (Order, bool, error) {
	p.done = make(chan placed, 1)
	w.mu.Lock()
	l, running := w.skus[p.r.SKU]
	if !running {
		l = &line{}
		w.skus[p.r.SKU] = l
	}
	l.queue = append(l.queue, p)
	w.mu.Unlock()
	if !running {
		go w.write(p.r.SKU)
	}
	select {
	case res := <-p.done:
		return res.o, res.replayed, res.err
	case <-p.ctx.Done():
		return Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, context.Cause(p.ctx))
	}
}

// stocked reports whether sku's writer runs and its last batch left stock.
func (b *Batched) stocked(sku string) bool {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	l := b.w.skus[sku]
	return l != nil && l.stocked
}

func soldOut(sku string) error { return fmt.Errorf("order: place: %w: %s", stock.ErrSoldOut, sku) }

// replayOr answers a buyer with the order its key already has, if it has
// one, and otherwise with err: a refusal, which may only be because that
// order took the stock, or nil when the buyer has no answer yet. When the
// database cannot say, the buyer is busy, never refused: its order may
// exist.
func replayOr(ctx context.Context, gdb *gorm.DB, r PlaceRequest, err error) (Order, bool, error) {
	o, found, e := existing(ctx, gdb, r)
	switch {
	case found:
		return o, true, nil
	case errors.Is(e, ErrKeyReused):
		return Order{}, false, e
	case e != nil:
		return Order{}, false, fmt.Errorf("%w: %w", stock.ErrBusy, e)
	default:
		return Order{}, false, err
	}
}

// existing returns the order that r's key already has, if any: found, or
// ErrKeyReused if it is for another SKU or quantity.
func existing(ctx context.Context, gdb *gorm.DB, r PlaceRequest) (o Order, found bool, err error) {
	err = gdb.WithContext(ctx).Where("user_id = ? AND idempotency_key = ?", r.UserID, r.IdempotencyKey).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("order: place: %w", err)
	}
	if o.SKU != r.SKU || o.Quantity != r.Quantity {
		return Order{}, false, fmt.Errorf("%w: order %d", ErrKeyReused, o.ID)
	}
	return o, true, nil
}

// write commits the SKU's batches until nobody waits.
func (w *writer) write(sku string) {
	w.mu.Lock()
	l := w.skus[sku]
	for len(l.queue) > 0 {
		n := min(len(l.queue), maxBatch)
		batch := l.queue[:n:n]
		l.queue = l.queue[n:]
		w.mu.Unlock()
		left, ok := w.commit(sku, batch)
		w.mu.Lock()
		l.stocked = ok && left > 0
		if ok && left == 0 {
			// A lua reservation holds units in Redis: a batch decides it,
			// so that it is settled.
			kept := l.queue[:0]
			for _, p := range l.queue {
				if p.entry != "" {
					kept = append(kept, p)
					continue
				}
				p.done <- placed{err: soldOut(sku)}
			}
			l.queue = kept
		}
	}
	delete(w.skus, sku)
	w.mu.Unlock()
}

// commit runs one batch's transaction, again after a deadlock or a
// lock-wait timeout while any buyer in it still waits, and answers them.
// Once the batch has committed, it reports ok and the stock it left.
func (w *writer) commit(sku string, batch []*pending) (left int, ok bool) {
	metrics.BatchSize.WithLabelValues(w.name).Observe(float64(len(batch)))
	defer func(start time.Time) {
		metrics.BatchCommit.WithLabelValues(w.name).Observe(time.Since(start).Seconds())
	}(time.Now())
	// The first attempt assumes that no key of the batch has an order yet,
	// which is almost always so (the key store answers retries): should one
	// have, the INSERT fails on the unique index, and the batch runs again
	// at once, with the keys looked up.
	lookedUp := false
	for attempt := 0; ; attempt++ {
		ctx, cancel := batchContext(batch)
		if ctx.Err() != nil {
			cancel()
			return 0, false // every buyer has been answered busy
		}
		answers := make([]placed, len(batch))
		var known map[userKey]Order // nil: no key has an order
		var err error
		if lookedUp {
			known, err = lookup(ctx, w.db, batch)
		}
		if err == nil {
			err = w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) (err error) {
				left, err = decide(tx, sku, batch, known, answers, w.exactIDs(tx))
				return err
			})
		}
		cancel()
		if db.IsDuplicate(err) && !lookedUp {
			lookedUp = true
			continue
		}
		if err == nil {
			if w.settle != nil {
				w.settle(sku, batch, answers)
			}
			for i, p := range batch {
				p.done <- answers[i]
			}
			return left, true
		}
		// A duplicate key now means another SKU's batch inserted one of
		// these keys after this batch looked, or this very batch committed
		// and its answer was lost with the connection: the next attempt
		// finds it. A lost connection is tried again too, while buyers
		// wait: a lua reservation is taken already, and its buyer would
		// otherwise wait for the reconciler's claim.
		if !db.IsRetryable(err) && !db.IsDuplicate(err) && !backend.Unavailable(err) {
			for _, p := range batch {
				p.done <- placed{err: fmt.Errorf("order: place: %w", err)}
			}
			return 0, false
		}
		wait, stop := batchContext(batch)
		err = backoff.Wait(wait, attempt)
		stop()
		if err != nil {
			return 0, false // every buyer has been answered busy
		}
	}
}

// batchContext lasts until the latest deadline of the buyers still waiting.
func batchContext(batch []*pending) (context.Context, context.CancelFunc) {
	var last time.Time
	waiting := false
	for _, p := range batch {
		if p.ctx.Err() != nil {
			continue
		}
		waiting = true
		d, ok := p.ctx.Deadline()
		if !ok {
			d = time.Now().Add(time.Minute)
		}
		if d.After(last) {
			last = d
		}
	}
	if !waiting {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	return context.WithDeadline(context.Background(), last)
}

// userKey is one buyer's Idempotency-Key.
type userKey struct{ user, key string }

// lookup reads the orders that the batch's keys already have, outside the
// batch's transaction, so that its row lock is not held for the read. A key
// that gets an order after the read fails the INSERT on the unique index,
// and the batch runs again.
func lookup(ctx context.Context, gdb *gorm.DB, batch []*pending) (map[userKey]Order, error) {
	users := make([]string, len(batch))
	for i, p := range batch {
		users[i] = p.r.UserID
	}
	// By user alone: the index's prefix, one range per user, where users
	// and keys together would ask for every pair.
	var existing []Order
	if err := gdb.WithContext(ctx).Raw(`SELECT * FROM orders WHERE user_id IN ?`, users).Scan(&existing).Error; err != nil {
		return nil, err
	}
	known := make(map[userKey]Order, len(existing))
	for _, o := range existing {
		if o.IdempotencyKey != nil {
			known[userKey{o.UserID, *o.IdempotencyKey}] = o
		}
	}
	return known, nil
}

// decide is one batch's transaction: it fills answers and returns the stock
// it leaves, or -1 if the SKU is not on sale. The stock row is locked from
// its first statement to the commit, so it does as little as it can in
// between: when every buyer's units fit and no per-user limit applies, it
// takes them all with its first statement.
func decide(tx *gorm.DB, sku string, batch []*pending, known map[userKey]Order, answers []placed, exactIDs bool) (left int, err error) {
	now := time.Now().UTC()
	users := make([]string, len(batch))
	asked, seen := 0, map[userKey]bool{}
	for i, p := range batch {
		users[i] = p.r.UserID
		if k := (userKey{p.r.UserID, p.r.IdempotencyKey}); !seen[k] {
			seen[k] = true
			if _, ok := known[k]; !ok {
				asked += p.r.Quantity
			}
		}
	}
	limit := batch[0].limit
	// lua's reservations were taken from a Redis state; one of an epoch
	// before the SKU's current one was lost with its state (Redis restarted
	// empty), and the state built since does not count it. Persisting it
	// would sell a unit that Redis sells again, and its buyer, answered
	// busy, may since have been told sold out: it is refused, busy, and its
	// buyer's retry reserves in the current state. The epoch is read under
	// the row lock; should a reservation be refused, the units taken for it
	// go back before the commit.
	fenced := batch[0].entry != ""
	took := false
	if asked > 0 && limit == 0 {
		if took, err = takeAll(tx, sku, asked, now); err != nil {
			return 0, err // a failed statement may have ended the transaction
		}
	}
	if !took {
		// Lock the row, then read it below: the read sees every commit
		// before the lock, and no batch or refund can change it until this
		// one commits.
		res := tx.Exec(`UPDATE stock_items SET version = version + 1, updated_at = ? WHERE sku = ?`, now, sku)
		if res.Error != nil {
			return 0, res.Error
		}
		if res.RowsAffected == 0 {
			for i := range answers {
				answers[i].err = fmt.Errorf("order: place: %w: %s", stock.ErrNotFound, sku)
			}
			return -1, nil
		}
	}
	// What is left, after the units taken if took, and the epoch.
	var available int
	var epoch int64
	if err := tx.Raw(`SELECT available, (SELECT COALESCE(MAX(epoch), 0) FROM stock_epochs WHERE sku = ?) FROM stock_items WHERE sku = ?`, sku, sku).Row().Scan(&available, &epoch); err != nil {
		return 0, err
	}
	if took {
		available += asked // every buyer's units fit
	}
	held := map[string]int{}
	if limit > 0 {
		var rows []purchase
		if err := tx.Raw(`SELECT * FROM user_purchases WHERE sku = ? AND user_id IN ?`, sku, users).Scan(&rows).Error; err != nil {
			return 0, err
		}
		for _, row := range rows {
			held[row.UserID] = row.Units
		}
	}

	first := map[userKey]int{} // the buyer in this batch who asked first with a key
	var granted []Order
	changed := map[string]bool{} // users whose holdings grow
	taken := 0
	for i, p := range batch {
		r, k := p.r, userKey{p.r.UserID, p.r.IdempotencyKey}
		if o, ok := known[k]; ok {
			answers[i] = replayOf(o, r)
			continue
		}
		if fenced && p.epoch != epoch {
			answers[i].err = fmt.Errorf("order: place: %w: the reservation's Redis state, of epoch %d, was lost; the SKU is in epoch %d", stock.ErrBusy, p.epoch, epoch)
			continue
		}
		if _, ok := first[k]; ok {
			answers[i].err = errSameKeyPending // settled once the first is
			continue
		}
		first[k] = i
		switch {
		case p.limit > 0 && held[r.UserID]+r.Quantity > p.limit:
			answers[i].err = fmt.Errorf("order: place: %w: %s holds %d of %s, the limit is %d", ErrLimitReached, r.UserID, held[r.UserID], sku, p.limit)
		case r.Quantity > available-taken:
			answers[i].err = soldOut(sku)
		default:
			taken += r.Quantity
			if p.limit > 0 {
				held[r.UserID] += r.Quantity
				changed[r.UserID] = true
			}
			key := r.IdempotencyKey
			granted = append(granted, Order{SKU: sku, UserID: r.UserID, Quantity: r.Quantity, Status: StatusCreated, IdempotencyKey: &key, CreatedAt: now})
			answers[i].err = errGranted
		}
	}
	if took && taken < asked { // refused reservations of a lost epoch
		if err := tx.Exec(`UPDATE stock_items SET available = available + ? WHERE sku = ?`, asked-taken, sku).Error; err != nil {
			return 0, err
		}
	}
	if len(granted) > 0 {
		if !took {
			res := tx.Exec(`UPDATE stock_items SET available = available - ? WHERE sku = ? AND available >= ?`, taken, sku, taken)
			if res.Error != nil {
				return 0, res.Error
			}
			if res.RowsAffected != 1 {
				return 0, fmt.Errorf("order: batch of %s: the stock changed under the row lock", sku)
			}
		}
		if err := tx.Create(&granted).Error; err != nil {
			return 0, err
		}
		if len(changed) > 0 {
			rows := make([]purchase, 0, len(changed))
			for user := range changed {
				rows = append(rows, purchase{UserID: user, SKU: sku, Units: held[user]})
			}
			err := tx.Clauses(clause.OnConflict{
				Columns:   []clause.Column{{Name: "user_id"}, {Name: "sku"}},
				DoUpdates: clause.AssignmentColumns([]string{"units"}),
			}).Create(&rows).Error
			if err != nil {
				return 0, err
			}
		}
		if !exactIDs {
			if err := readIDs(tx, sku, granted); err != nil {
				return 0, err
			}
		}
		g := 0
		for i := range answers {
			if answers[i].err == errGranted {
				answers[i] = placed{o: granted[g]}
				g++
			}
		}
	}
	// Buyers who repeated a key in the batch get what its first buyer got.
	for i, p := range batch {
		if j := first[userKey{p.r.UserID, p.r.IdempotencyKey}]; j != i && errors.Is(answers[i].err, errSameKeyPending) {
			answers[i] = sameKeyAnswer(answers[j], p.r)
		}
	}
	return available - taken, nil
}

// readIDs sets the ids of the orders just inserted, read back by key: a
// multi-row INSERT's ids need not be consecutive, but none is below the
// first, and under the row lock no other order of this SKU is inserted.
func readIDs(tx *gorm.DB, sku string, granted []Order) error {
	var ids []Order
	if err := tx.Raw(`SELECT id, user_id, idempotency_key FROM orders WHERE sku = ? AND id >= ?`, sku, granted[0].ID).Scan(&ids).Error; err != nil {
		return err
	}
	byKey := make(map[userKey]int64, len(ids))
	for _, o := range ids {
		if o.IdempotencyKey != nil {
			byKey[userKey{o.UserID, *o.IdempotencyKey}] = o.ID
		}
	}
	for i, o := range granted {
		granted[i].ID = byKey[userKey{o.UserID, *o.IdempotencyKey}]
	}
	return nil
}

// exactIDs reports whether the ids that GORM sets after a multi-row INSERT
// are the rows' own. Where the database returns them (INSERT … RETURNING:
// SQLite, MariaDB 10.5 and later) they are. Elsewhere (MySQL) GORM counts
// up from the first, one at a time: right for one INSERT's rows, which get
// consecutive ids in every InnoDB lock mode, only while the server's
// auto_increment_increment is 1. It is asked once.
func (w *writer) exactIDs(tx *gorm.DB) bool {
	w.idsOnce.Do(func() {
		if slices.Contains(tx.Callback().Create().Clauses, "RETURNING") {
			w.ids = true
			return
		}
		var step int
		w.ids = tx.Raw(`SELECT @@auto_increment_increment`).Row().Scan(&step) == nil && step == 1
	})
	return w.ids
}

// takeAll takes asked units of sku, locking its row, if they are there.
// Otherwise it changes nothing and reports false.
func takeAll(tx *gorm.DB, sku string, asked int, now time.Time) (bool, error) {
	res := tx.Exec(`UPDATE stock_items SET available = available - ?, version = version + 1, updated_at = ?
		WHERE sku = ? AND available >= ?`, asked, now, sku, asked)
	return res.RowsAffected == 1, res.Error
}

// errGranted marks a granted buyer until its order has an id.
var errGranted = errors.New("order: granted")

// errSameKeyPending marks a buyer whose key an earlier buyer of the batch
// used, until that buyer is answered.
var errSameKeyPending = errors.New("order: same key in the batch")

// sameKeyAnswer answers a repeat of a key from the first buyer's answer: a
// replay of its order, or ErrKeyReused if the request differs.
func sameKeyAnswer(first placed, r PlaceRequest) placed {
	if first.err != nil {
		return placed{err: first.err}
	}
	return replayOf(first.o, r)
}

// replayOf answers r, whose key already has order o.
func replayOf(o Order, r PlaceRequest) placed {
	if o.SKU != r.SKU || o.Quantity != r.Quantity {
		return placed{err: fmt.Errorf("%w: order %d", ErrKeyReused, o.ID)}
	}
	return placed{o: o, replayed: true}
}
