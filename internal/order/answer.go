package order

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/stock"
)

// The final answers stored under a buyer's Idempotency-Key, by the service
// (keys.go) or by a placement that keeps its keys itself
// (Placement.StoresKeys), and replayed to a retry of the same request: an
// order, or a refusal. Each is a few bytes, and reads back as the same
// answer, its text included.

// Answer is a buyer's answer to an order request: the order, and whether
// it was placed by an earlier request with the same key (Replayed), or a
// refusal or failure.
type Answer struct {
	Order    Order
	Replayed bool
	Err      error
}

// ErrClosed answers, busy, a buyer who comes once the shop is closing.
var ErrClosed = errors.New("order: the shop is closing")

// Now is a new order's time, to the microsecond that the database
// keeps: the order a replay reads back is the one first answered.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// refusal is a final answer that is not an order. Its text is made from
// its fields alone, so that its replay reads the same.
type refusal struct {
	kind  idempotency.AnswerKind // one of the refusal kinds below
	sku   string
	user  string
	held  int   // over the limit: what the user held
	limit int   // over the limit: the limit
	order int64 // key reused: the order the key has
}

// StoredSoldOut is a sold-out refusal of the request's own SKU, as kept.
var StoredSoldOut = idempotency.Answer{Kind: idempotency.SoldOut}.Encode()

// The kinds of refusal are those of the kept answers.
const (
	refusedSoldOut  = idempotency.SoldOut
	refusedLimit    = idempotency.OverLimit
	refusedReused   = idempotency.Reused
	refusedNotFound = idempotency.NotFound
)

func (e *refusal) Error() string {
	switch e.kind {
	case refusedSoldOut:
		return fmt.Sprintf("order: place: %v: %s", stock.ErrSoldOut, strings.Join(e.Short(), ", "))
	case refusedLimit:
		return fmt.Sprintf("order: place: %v: %s holds %d of %s, the limit is %d", ErrLimitReached, e.user, e.held, e.sku, e.limit)
	case refusedReused:
		return fmt.Sprintf("order: place: %v: order %d", idempotency.ErrKeyReused, e.order)
	default:
		return fmt.Sprintf("order: place: %v: %s", stock.ErrNotFound, e.sku)
	}
}

// Is makes the refusal each kind's sentinel.
func (e *refusal) Is(target error) bool {
	switch e.kind {
	case refusedSoldOut:
		return target == stock.ErrSoldOut
	case refusedLimit:
		return target == ErrLimitReached
	case refusedReused:
		return target == idempotency.ErrKeyReused
	default:
		return target == stock.ErrNotFound
	}
}

// isRefusal reports whether err is a final refusal, which names itself.
func isRefusal(err error) bool {
	var e *refusal
	return errors.As(err, &e)
}

func SoldOut(sku string) error { return &refusal{kind: refusedSoldOut, sku: sku} }

// Short returns the SKUs that a sold-out refusal found short: of a cart,
// each of them, kept newline-separated in sku.
func (e *refusal) Short() []string {
	if e.kind != refusedSoldOut {
		return nil
	}
	return strings.Split(e.sku, "\n")
}

// AsRefusal turns a strategy's sold-out refusal of a cart into the
// service's, which is kept under the buyer's key with the SKUs it names.
func AsRefusal(err error) error {
	var short *stock.ShortError
	if errors.As(err, &short) {
		return &refusal{kind: refusedSoldOut, sku: strings.Join(short.SKUs, "\n")}
	}
	return err
}

func LimitReached(user, sku string, held, limit int) error {
	return &refusal{kind: refusedLimit, sku: sku, user: user, held: held, limit: limit}
}

func keyReused(order int64) error { return &refusal{kind: refusedReused, order: order} }

func NotFound(sku string) error { return &refusal{kind: refusedNotFound, sku: sku} }

// Stored is a's answer as it is kept under its key
// (idempotency.Answer); ok is false for an answer that is not final, such
// as busy, which is not kept.
func Stored(a Answer) (answer string, ok bool) {
	var e *refusal
	switch {
	case a.Err == nil:
		return idempotency.Answer{Kind: idempotency.Placed, ID: a.Order.ID, Created: a.Order.CreatedAt, Deadline: a.Order.ExpiresAt}.Encode(), true
	case !errors.As(a.Err, &e):
		return "", false
	}
	// A sold-out answer keeps the SKUs that were short, a cart's too.
	return idempotency.Answer{Kind: e.kind, ID: e.order, Short: e.sku, Limit: e.limit, Held: e.held}.Encode(), true
}

// KeepRefusal keeps err, when it is a final refusal, through keep, which
// stores its answer under the request's key, and returns what keep
// returned. keep has RedisTimeout, even once ctx is done; should it fail,
// a retry asks again.
func KeepRefusal(ctx context.Context, err error, keep func(ctx context.Context, answer string) error) error {
	if err == nil {
		return nil
	}
	answer, ok := Stored(Answer{Err: err})
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RedisTimeout)
	defer cancel()
	return keep(ctx, answer)
}

// StoredLimit is the kept form of a refusal over limit, less what the user
// held, which follows it: Redis's script, which knows that, appends it.
func StoredLimit(limit int) string { return idempotency.LimitPrefix(limit) }

// ReplayStored is the answer kept as answer, replayed to r: the request
// that got it, the same user, key, SKU and quantity.
func ReplayStored(answer string, r PlaceRequest) Answer {
	a, err := idempotency.ParseAnswer(answer)
	if err != nil {
		return Answer{Err: fmt.Errorf("order: the answer stored under %s's key %q: %w", r.UserID, r.IdempotencyKey, err)}
	}
	p := Answer{Replayed: true}
	switch a.Kind {
	case idempotency.Placed:
		key := r.IdempotencyKey
		p.Order = Order{ID: a.ID, SKU: r.SKU, UserID: r.UserID, Quantity: r.Quantity, Status: StatusCreated,
			IdempotencyKey: &key, CreatedAt: a.Created}
		if a.Deadline != nil {
			p.Order.Status, p.Order.ExpiresAt = StatusPending, a.Deadline
		}
	case idempotency.SoldOut:
		p.Err = &refusal{kind: a.Kind, sku: cmp.Or(a.Short, r.SKU)}
	case idempotency.OverLimit:
		p.Err = LimitReached(r.UserID, r.SKU, a.Held, a.Limit)
	case idempotency.Reused:
		p.Err = keyReused(a.ID)
	default:
		p.Err = NotFound(r.SKU)
	}
	return p
}
