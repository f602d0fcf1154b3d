package redisstock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/shop/internal/stock"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/redispipe"
)

var (
	// doubt.lua is the prelude of the scripts that may find a SKU short.
	//go:embed doubt.lua
	doubtLua string
	//go:embed reserve.lua
	reserveLua    string
	reserveScript = redis.NewScript(doubtLua + reserveLua)
	//go:embed settle.lua
	settleLua    string
	settleScript = redis.NewScript(settleLua)
	//go:embed adjust.lua
	adjustLua    string
	adjustScript = redis.NewScript(adjustLua)
	//go:embed load.lua
	loadLua    string
	loadScript = redis.NewScript(loadLua)
)

// Errors of Stock. Callers test them with errors.Is.
var (
	// ErrStale means the SKU's Redis state is missing, or was built for
	// another epoch than the caller's: it must be built again from the
	// database before it sells.
	ErrStale = errors.New("stock: redis state missing or stale")
	// ErrOverLimit means the user's reservations would pass the per-user
	// limit.
	ErrOverLimit = errors.New("stock: per-user limit")
	// ErrLookup means the buyer's key may have an order that Redis does not
	// know of: the key's order was persisted, or the state was built while
	// the database had orders. The caller looks the key up in the database
	// and, if it has no order there, reserves again with LookedUp set.
	ErrLookup = errors.New("stock: look the idempotency key up in the database first")
	// ErrUnknownReply means a script answered what its caller does not
	// know: a script and its caller of different versions. It is no
	// business answer, and nothing is taken for one.
	ErrUnknownReply = errors.New("stock: unknown script reply")
)

// Reservation is one buyer's units taken in Redis and logged in the SKU's
// stream until the database has them.
type Reservation struct {
	ID       string // the stream entry's id
	UserID   string
	Key      string // the buyer's Idempotency-Key
	Quantity int
	Saga     string // a cart's line: the saga that reserved it (ReserveCart)
}

// Stock is the stock of the lua strategy in Redis: per SKU, a state
// (available, and the epoch it was built for), what each user holds, and a
// stream of the reservations the database does not have yet, the recovery
// log, every key under the SKU's hash tag. Its invariant: a state's
// available is the database's, less the units of the reservations in the
// log; Reserve, Settle, Adjust and Load each keep it in one atomic step.
// See docs/strategies.md#the-fast-path-lua.
type Stock struct {
	rdb      redis.UniversalClient
	pipe     *redispipe.Pipe // for Reserve, which every buyer makes, and carts' lines
	prefix   string
	consumer string // this process in the log's consumer group
}

// group is the one consumer group of every log, passed to its scripts.
const group = "shop"

// New returns the stock on rdb, every key under prefix.
func New(rdb redis.UniversalClient, prefix string) *Stock {
	return &Stock{rdb: rdb, pipe: redispipe.New(rdb), prefix: prefix, consumer: "c-" + strings.ToLower(rand.Text()[:12])}
}

// Close waits for the pipelines under way; the stock's owner calls it
// before it closes rdb.
func (s *Stock) Close() { s.pipe.Close() }

// Terms are what Reserve checks a reservation against.
type Terms struct {
	Epoch int64 // of the state it must be taken from
	Limit int   // per user; 0 for none
	// LookedUp says that the caller found no order under the key in the
	// database.
	LookedUp bool
	// TakeOver is how long the key's earlier reservation, still in the
	// log, must have been pending before this request takes it over, as
	// the claim would: until then its process may still be persisting it
	// (*InProgressError).
	TakeOver time.Duration
	// Refusals is what a refusal keeps as the key's answer.
	Refusals Refusals
}

// Refusals are the answers that Reserve keeps for its refusals, as the
// caller encodes answers, for TTL: a retry of the same request gets it
// again (Reserve's answer). The zero value keeps none.
type Refusals struct {
	TTL     time.Duration
	SoldOut string
	// OverLimit is followed by what the user holds.
	OverLimit string
}

// Reserve claims r's key and takes r's units of sku, in one step. A key
// already answered returns its kept answer, and takes nothing. Otherwise,
// if the state is of t's epoch, the stock suffices and the user stays
// within the limit, it logs the reservation, pending for this process, and
// returns its id. Its refusals, ErrSoldOut and ErrOverLimit (with what the
// user holds, as *OverLimitError), are kept as the key's answer, as
// t.Keep says. It returns ErrStale, idempotency.ErrKeyReused,
// *InProgressError, ErrLookup and ErrInDoubt too.
//
// A refusal is final: the key has no order that Redis does not know of.
func (s *Stock) Reserve(ctx context.Context, sku string, r Reservation, t Terms) (id, answer string, err error) {
	k := s.keys(sku)
	v, err := s.pipe.Run(ctx, reserveScript, []string{k[kState], k[kHoldings], k[kLog], k[kKeys], s.answerKey(sku, r.UserID, r.Key)},
		t.Epoch, r.UserID, r.Key, r.Quantity, t.Limit, s.consumer, flag(t.LookedUp), t.TakeOver.Milliseconds(), group,
		t.Refusals.TTL.Milliseconds(), r.record(t.Refusals.SoldOut), r.record(t.Refusals.OverLimit), r.field()).StringSlice()
	if err != nil {
		return "", "", fmt.Errorf("stock: reserve: %w", err)
	}
	if len(v) == 0 || (len(v) < 2 && v[0] != "lookup" && v[0] != "in-doubt") {
		return "", "", fmt.Errorf("%w: reserve: %q", ErrUnknownReply, v)
	}
	switch v[0] {
	case "ok":
		return v[1], "", nil
	case "answer":
		return "", v[1], nil
	case "stale":
		return "", "", fmt.Errorf("%w: %s: epoch %q, want %d", ErrStale, sku, v[1], t.Epoch)
	case "sold-out":
		return "", "", fmt.Errorf("%w: %s", stock.ErrSoldOut, sku)
	case "reused":
		return "", "", fmt.Errorf("stock: reserve: %w: %s's key %q has a reservation or answer for another quantity %s", idempotency.ErrKeyReused, r.UserID, r.Key, v[1])
	case "in-progress":
		return "", "", fmt.Errorf("stock: reserve: %s's key %q: %w", r.UserID, r.Key, &InProgressError{ID: v[1]})
	case "lookup":
		return "", "", fmt.Errorf("%w: %s's key %q", ErrLookup, r.UserID, r.Key)
	case "in-doubt":
		return "", "", fmt.Errorf("%w: %s", ErrInDoubt, sku)
	case "limit":
		held, err := strconv.Atoi(v[1])
		if err != nil {
			return "", "", fmt.Errorf("%w: reserve: %q", ErrUnknownReply, v)
		}
		return "", "", &OverLimitError{Held: held}
	default:
		return "", "", fmt.Errorf("%w: reserve: %q", ErrUnknownReply, v)
	}
}

// InProgressError is idempotency.ErrInProgress from Reserve: the key's
// reservation, ID in the log, is pending for a process that took it less
// than Terms.TakeOver ago, and may be persisting it.
type InProgressError struct{ ID string }

func (e *InProgressError) Error() string {
	return fmt.Sprintf("%v: its reservation %s is being persisted", idempotency.ErrInProgress, e.ID)
}

// Is makes it idempotency.ErrInProgress.
func (e *InProgressError) Is(target error) bool { return target == idempotency.ErrInProgress }

// OverLimitError is ErrOverLimit, with what the user held.
type OverLimitError struct{ Held int }

func (e *OverLimitError) Error() string {
	return fmt.Sprintf("%v: the user holds %d", ErrOverLimit, e.Held)
}

// Is makes it ErrOverLimit.
func (e *OverLimitError) Is(target error) bool { return target == ErrOverLimit }

// Store keeps answer as the final answer to user's request for quantity
// under key, as Reserve reads it, for ttl: for an answer that no script
// gave, such as a SKU that is not on sale.
func (s *Stock) Store(ctx context.Context, sku, user, key string, quantity int, answer string, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.answerKey(sku, user, key), Reservation{Quantity: quantity}.record(answer), ttl).Err(); err != nil {
		return fmt.Errorf("stock: store: %w", err)
	}
	return nil
}

// KeepFirst keeps answer as the final answer to user's request for
// quantity under key, as Store does, unless the key has an answer kept
// already: it then returns that one's record, with found. One SET NX GET,
// in the next pipeline.
func (s *Stock) KeepFirst(ctx context.Context, sku, user, key string, quantity int, answer string, ttl time.Duration) (record string, found bool, err error) {
	v, err := s.pipe.Do(ctx, "SET", s.answerKey(sku, user, key), Reservation{Quantity: quantity}.record(answer), "NX", "GET", "PX", ttl.Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("stock: keep: %w", err)
	}
	return v, true, nil
}

// Unkeep forgets the answer kept for user's key, as Reserve kept a
// refusal that came from a state it no longer trusts.
func (s *Stock) Unkeep(ctx context.Context, sku, user, key string) error {
	if err := s.rdb.Del(ctx, s.answerKey(sku, user, key)).Err(); err != nil {
		return fmt.Errorf("stock: unkeep: %w", err)
	}
	return nil
}

// Settled is how a reservation ended, for Settle.
type Settled int

// How reservations end.
const (
	// Persisted: the database has the reservation's order.
	Persisted Settled = iota
	// Released: the database refused it; its units go back.
	Released
	// Replayed: its key already had an order, which took units of its
	// own; its units go back.
	Replayed
)

// Settlement is how one reservation ended and, when the database has its
// order, the answer that order is, as Reserve returns it: "" for none.
type Settlement struct {
	Reservation
	How    Settled
	Answer string
	Bucket string // the bucket it was taken from (BucketOf); "" for the SKU
}

// Settle ends reservations of sku whose batch has committed, each as its
// settlement says, and keeps the answers of their orders, for the sale's
// life, in the same step. limited says whether holdings are kept. It
// returns the units given back.
func (s *Stock) Settle(ctx context.Context, sku string, ss []Settlement, limited bool) (int, error) {
	k := s.keys(sku)
	args := append(make([]any, 0, 2+6*len(ss)), group, flag(limited))
	for _, st := range ss {
		args = append(args, st.ID, st.Quantity, st.UserID, st.field(), int(st.How), st.record(st.Answer))
	}
	n, err := settleScript.Run(ctx, s.rdb, []string{k[kState], k[kHoldings], k[kLog], k[kKeys]}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("stock: settle: %w", err)
	}
	return n, nil
}

// Adjust applies delta, committed in the database under epoch, to the
// state of that epoch, and takes a refund's units off what user holds. It
// reports whether it applied it: a state of another epoch was built with
// the change in it, or must be built again anyway.
func (s *Stock) Adjust(ctx context.Context, sku string, epoch int64, delta int, user string, limited bool) (bool, error) {
	n, err := adjustScript.Run(ctx, s.rdb, s.keys(sku)[:2], epoch, delta, user, flag(limited)).Int()
	if err != nil {
		return false, fmt.Errorf("stock: adjust: %w", err)
	}
	return n == 1, nil
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}
