package order

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/batch"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// FirstReads reads, for a purchase, what is left of its SKU and whether its
// key already has an order: first, before the purchase queues, and again
// when it is refused (checkRefusal). The buyers of one SKU who arrive
// while its read is out share the next read, one statement for all their
// keys, which starts only after every buyer it answers has arrived. See
// docs/strategies.md#sold-out-answers-never-queue.
type FirstReads struct {
	db   *gorm.DB
	skus *batch.Batcher[string, *firstRead]
}

// maxRead bounds the buyers one read answers, and so its statement.
const maxRead = 256

// firstRead is one buyer's first read.
type firstRead struct {
	ctx  context.Context
	r    PlaceRequest
	done chan readAnswer // buffered: the reader never waits for the buyer
}

// readAnswer is what one read found for one buyer.
type readAnswer struct {
	err       error // the database could not say
	stocked   bool  // the SKU's stock row is there
	available int
	found     bool // the buyer's key has an order
}

func NewFirstReads(gdb *gorm.DB) *FirstReads {
	f := &FirstReads{db: gdb}
	f.skus = batch.New(maxRead, f.answer, nil)
	return f
}

// First answers r's First read.
func (f *FirstReads) First(ctx context.Context, r PlaceRequest) (Order, bool, error) {
	a := f.read(ctx, r)
	switch {
	case a.err != nil:
		return Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, a.err)
	case !a.stocked:
		return Order{}, false, NotFound(r.SKU)
	case a.found:
		return ReplayOr(ctx, f.db, r, nil)
	case a.available < r.Quantity:
		return Order{}, false, SoldOut(r.SKU)
	}
	return Order{}, false, nil
}

// CheckRefusal answers a refusal, sold out or over the limit, with the
// order r's key already has, if it has one. The refusal may be because
// that order took the stock or the user's limit: a retry whose first
// answer the key store forgot, or whose first attempt, answered busy,
// committed while this one decided. The buyers refused together, such as
// those a sell-out answers at once, look their keys up together. Other
// answers pass as they are.
func (f *FirstReads) CheckRefusal(ctx context.Context, r PlaceRequest, o Order, replayed bool, err error) (Order, bool, error) {
	if r.IdempotencyKey == "" || !(errors.Is(err, stock.ErrSoldOut) || errors.Is(err, ErrLimitReached)) {
		return o, replayed, err
	}
	switch a := f.read(ctx, r); {
	case a.err != nil:
		return Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, a.err)
	case a.found:
		return ReplayOr(ctx, f.db, r, err)
	}
	return Order{}, false, err
}

// read reads r's SKU and key, together with the other buyers of the SKU
// that wait for the next read.
func (f *FirstReads) read(ctx context.Context, r PlaceRequest) readAnswer {
	fr := &firstRead{ctx: ctx, r: r, done: make(chan readAnswer, 1)}
	if err := f.skus.Add(r.SKU, fr); err != nil {
		return readAnswer{err: ErrClosed}
	}
	select {
	case a := <-fr.done:
		return a
	case <-ctx.Done():
		return readAnswer{err: context.Cause(ctx)}
	}
}

// Close waits for every SKU's reader to answer its buyers, once no new
// reader may start.
func (f *FirstReads) Close() { f.skus.Close() }

// answer reads sku and the keys of reads in one statement and answers each
// buyer.
func (f *FirstReads) answer(sku string, reads []*firstRead) {
	metrics.FirstReadBuyers.Observe(float64(len(reads)))
	ctxs := make([]context.Context, len(reads))
	for i, fr := range reads {
		ctxs[i] = fr.ctx
	}
	ctx, cancel := batch.Waiting(ctxs)
	defer cancel()
	pairs := make([]string, len(reads))
	args := make([]any, 0, 2*len(reads)+1)
	for i, fr := range reads {
		pairs[i] = "(?, ?)"
		args = append(args, fr.r.UserID, fr.r.IdempotencyKey)
	}
	args = append([]any{stock.AvailableOf(f.db, sku)}, args...)
	rows, err := f.db.WithContext(ctx).Raw(`SELECT s.available, o.user_id, o.idempotency_key FROM (?) s
		LEFT JOIN orders o ON (o.user_id, o.idempotency_key) IN (`+strings.Join(pairs, ", ")+`)`, args...).Rows()
	var a readAnswer
	keyed := make(map[[2]string]bool)
	if err == nil {
		for rows.Next() {
			var user, key sql.NullString
			if err = rows.Scan(&a.available, &user, &key); err != nil {
				break
			}
			a.stocked = true
			keyed[[2]string{user.String, key.String}] = user.Valid
		}
		err = errors.Join(err, rows.Err(), rows.Close())
	}
	a.err = err
	for _, fr := range reads {
		a.found = keyed[[2]string{fr.r.UserID, fr.r.IdempotencyKey}]
		fr.done <- a
	}
}
