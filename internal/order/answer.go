package order

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	kind  byte // one of the refusal kinds below
	sku   string
	user  string
	held  int   // over the limit: what the user held
	limit int   // over the limit: the limit
	order int64 // key reused: the order the key has
}

// StoredSoldOut is a sold-out refusal of the request's own SKU, as kept.
const StoredSoldOut = string(refusedSoldOut)

// The kinds of refusal, as kept.
const (
	refusedSoldOut  = 's'
	refusedLimit    = 'l'
	refusedReused   = 'r'
	refusedNotFound = 'n'
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

// Stored is a's answer as it is Stored under its key; ok is false for an
// answer that is not final, such as busy, which is not Stored.
func Stored(a Answer) (answer string, ok bool) {
	var e *refusal
	switch {
	case a.Err == nil:
		answer = "o" + strconv.FormatInt(a.Order.ID, 10) + ":" + strconv.FormatInt(a.Order.CreatedAt.UnixMicro(), 10)
		if a.Order.ExpiresAt != nil { // placed pending: its deadline
			answer += ":" + strconv.FormatInt(a.Order.ExpiresAt.UnixMicro(), 10)
		}
		return answer, true
	case !errors.As(a.Err, &e):
		return "", false
	case e.kind == refusedLimit:
		return StoredLimit(e.limit) + strconv.Itoa(e.held), true
	case e.kind == refusedReused:
		return "r" + strconv.FormatInt(e.order, 10), true
	case e.kind == refusedSoldOut:
		return "s" + e.sku, true // with the SKUs that were short, a cart's too
	}
	return string(e.kind), true
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
func StoredLimit(limit int) string { return "l" + strconv.Itoa(limit) + ":" }

// ReplayStored is the answer kept as answer, replayed to r: the request
// that got it, the same user, key, SKU and quantity.
func ReplayStored(answer string, r PlaceRequest) Answer {
	kind, rest := byte(0), ""
	if answer != "" {
		kind, rest = answer[0], answer[1:]
	}
	a, b, _ := strings.Cut(rest, ":")
	b, c, pending := strings.Cut(b, ":")
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	z, errC := strconv.ParseInt(c, 10, 64)
	var p Answer
	switch {
	case kind == 'o' && errA == nil && errB == nil && (!pending || errC == nil):
		key := r.IdempotencyKey
		p.Order = Order{ID: x, SKU: r.SKU, UserID: r.UserID, Quantity: r.Quantity, Status: StatusCreated,
			IdempotencyKey: &key, CreatedAt: time.UnixMicro(y).UTC()}
		if pending {
			deadline := time.UnixMicro(z).UTC()
			p.Order.Status, p.Order.ExpiresAt = StatusPending, &deadline
		}
	case kind == refusedSoldOut && rest != "":
		p.Err = &refusal{kind: kind, sku: rest}
	case kind == refusedSoldOut || kind == refusedNotFound:
		p.Err = &refusal{kind: kind, sku: r.SKU}
	case kind == refusedLimit && errA == nil && errB == nil:
		p.Err = LimitReached(r.UserID, r.SKU, int(y), int(x))
	case kind == refusedReused && errA == nil:
		p.Err = keyReused(x)
	default:
		return Answer{Err: fmt.Errorf("order: the answer stored under %s's key %q is malformed: %q", r.UserID, r.IdempotencyKey, answer)}
	}
	p.Replayed = true
	return p
}
