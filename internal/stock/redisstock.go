package stock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/redispipe"
)

var (
	//go:embed reserve.lua
	reserveLua    string
	reserveScript = redis.NewScript(reserveLua)
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

// Errors of RedisStock. Callers test them with errors.Is.
var (
	// ErrStale means the SKU's Redis state is missing, or was built for
	// another epoch than the caller's: it must be built again from the
	// database before it sells.
	ErrStale = errors.New("stock: redis state missing or stale")
	// ErrOverLimit means the user's reservations would pass the per-user
	// limit.
	ErrOverLimit = errors.New("stock: per-user limit")
	// ErrKeyReused means the buyer's Idempotency-Key has a reservation in
	// the log for another quantity.
	ErrKeyReused = errors.New("stock: idempotency key reserved for another quantity")
	// ErrLookup means the buyer's key may have an order that Redis does not
	// know of: the key's order was persisted, or the state was built while
	// the database had orders. The caller looks the key up in the database
	// and, if it has no order there, reserves again with LookedUp set.
	ErrLookup = errors.New("stock: look the idempotency key up in the database first")
	// ErrInProgress means the buyer's key has a reservation that its
	// process may still be persisting: the buyer hears of it once it has.
	ErrInProgress = errors.New("stock: the idempotency key's reservation is being persisted")
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

// RedisStock is the stock of the lua strategy in Redis: per SKU, a state
// (available, and the epoch it was built for), what each user holds, and a
// stream of the reservations the database does not have yet, the recovery
// log, every key under the SKU's hash tag. Its invariant: a state's
// available is the database's, less the units of the reservations in the
// log; Reserve, Settle, Adjust and Load each keep it in one atomic step.
// See docs/strategies.md#the-fast-path-lua.
type RedisStock struct {
	rdb      redis.UniversalClient
	pipe     *redispipe.Pipe // for Reserve, which every buyer makes
	prefix   string
	consumer string // this process in the log's consumer group
}

// group is the one consumer group of every log, passed to its scripts.
const group = "shop"

// NewRedisStock returns the stock on rdb, every key under prefix.
func NewRedisStock(rdb redis.UniversalClient, prefix string) *RedisStock {
	return &RedisStock{rdb: rdb, pipe: redispipe.New(rdb), prefix: prefix, consumer: "c-" + strings.ToLower(rand.Text()[:12])}
}

// The indexes of a SKU's keys.
const (
	kState = iota
	kHoldings
	kLog
	kFence
	kKeys // each logged reservation's entry, by user and Idempotency-Key
)

// keys returns a SKU's keys, by the indexes above.
func (s *RedisStock) keys(sku string) []string {
	k := s.tagged(sku)
	return []string{k + "state", k + "holdings", k + "log", k + "fence", k + "keys"}
}

// tagged is the start of each of a SKU's keys. The braces make the SKU
// the hash tag, so that a SKU's keys share one Redis Cluster slot, and
// SKUs spread over the masters. A SKU with a sale tag of its own, such as
// "{spring}shoes", is tagged with it instead, so that the SKUs of one sale
// share a slot, and a cart of them is one script; then the SKU,
// hex-encoded, tells its keys apart. A SKU with other braces is
// hex-encoded, so that they cannot end the tag early. A bucket of a SKU
// (BucketOf) adds its number to the tag, after a byte no SKU holds, so
// that its buckets spread over the masters too.
func (s *RedisStock) tagged(name string) string {
	sku, b := SplitBucket(name)
	bucket := ""
	if b > 0 {
		bucket = bucketSep + strconv.Itoa(b)
	}
	hexed := hex.EncodeToString([]byte(sku))
	if i := strings.IndexByte(sku, '{'); i >= 0 {
		if j := strings.IndexByte(sku[i+1:], '}'); j > 0 {
			return s.prefix + "lua:{" + sku[i+1:i+1+j] + bucket + "}:" + hexed + ":"
		}
		return s.prefix + "lua:{" + hexed + bucket + "}:"
	}
	return s.prefix + "lua:{" + sku + bucket + "}:"
}

// bucketSep ends a SKU in the name of one of its buckets: a byte that no
// SKU holds (they are visible ASCII).
const bucketSep = "\x1f"

// BucketOf names bucket b of sku's stock in Redis, as RedisStock takes a
// SKU. Bucket 0 is the SKU itself: with one bucket, nothing changes.
func BucketOf(sku string, b int) string {
	if b == 0 {
		return sku
	}
	return sku + bucketSep + strconv.Itoa(b)
}

// SplitBucket returns the SKU and the bucket that name names.
func SplitBucket(name string) (sku string, bucket int) {
	sku, n, found := strings.Cut(name, bucketSep)
	if !found {
		return name, 0
	}
	bucket, _ = strconv.Atoi(n)
	return sku, bucket
}

// answerKey is where a buyer's final answer is kept: under the SKU's hash
// tag, so that the scripts that reserve and settle keep it in the same
// step. Neither a user nor a key holds a newline.
func (s *RedisStock) answerKey(sku, user, key string) string {
	return s.tagged(sku) + "answer:" + user + "\n" + key
}

// skus is the set of SKUs that have a log, for Claim.
func (s *RedisStock) skus() string { return s.prefix + "lua:skus" }

// Terms are what Reserve checks a reservation against.
type Terms struct {
	Epoch int64 // of the state it must be taken from
	Limit int   // per user; 0 for none
	// LookedUp says that the caller found no order under the key in the
	// database.
	LookedUp bool
	// TakeOver is how long the key's earlier reservation, still in the
	// log, must have been pending before this request takes it over: until
	// then its process may still be persisting it (ErrInProgress).
	TakeOver time.Duration
	// Keep is what a refusal keeps as the key's answer.
	Keep Refusals
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
// t.Keep says. It returns ErrStale, ErrKeyReused, ErrInProgress and
// ErrLookup and ErrInDoubt too.
//
// A refusal is final: the key has no order that Redis does not know of.
func (s *RedisStock) Reserve(ctx context.Context, sku string, r Reservation, t Terms) (id, answer string, err error) {
	k := s.keys(sku)
	v, err := s.pipe.Run(ctx, reserveScript, []string{k[kState], k[kHoldings], k[kLog], k[kKeys], s.answerKey(sku, r.UserID, r.Key)},
		t.Epoch, r.UserID, r.Key, r.Quantity, t.Limit, s.consumer, flag(t.LookedUp), t.TakeOver.Milliseconds(), group,
		t.Keep.TTL.Milliseconds(), t.Keep.SoldOut, t.Keep.OverLimit).StringSlice()
	if err != nil {
		return "", "", fmt.Errorf("stock: reserve: %w", err)
	}
	switch v[0] {
	case "ok":
		return v[1], "", nil
	case "answer":
		return "", v[1], nil
	case "stale":
		return "", "", fmt.Errorf("%w: %s: epoch %q, want %d", ErrStale, sku, v[1], t.Epoch)
	case "sold-out":
		return "", "", fmt.Errorf("%w: %s", ErrSoldOut, sku)
	case "reused":
		return "", "", fmt.Errorf("%w: %s's key %q has a reservation or answer for another quantity %s", ErrKeyReused, r.UserID, r.Key, v[1])
	case "in-progress":
		return "", "", fmt.Errorf("%w: %s's key %q, reservation %s", ErrInProgress, r.UserID, r.Key, v[1])
	case "lookup":
		return "", "", fmt.Errorf("%w: %s's key %q", ErrLookup, r.UserID, r.Key)
	case "in-doubt":
		return "", "", fmt.Errorf("%w: %s", ErrInDoubt, sku)
	default:
		held, _ := strconv.Atoi(v[1])
		return "", "", &OverLimitError{Held: held}
	}
}

// OverLimitError is ErrOverLimit, with what the user held.
type OverLimitError struct{ Held int }

func (e *OverLimitError) Error() string {
	return fmt.Sprintf("%v: the user holds %d", ErrOverLimit, e.Held)
}

// Is makes it ErrOverLimit.
func (e *OverLimitError) Is(target error) bool { return target == ErrOverLimit }

// Keep keeps answer as the final answer to user's request for quantity
// under key, as Reserve reads it, for ttl: for an answer that no script
// gave, such as a SKU that is not on sale.
func (s *RedisStock) Keep(ctx context.Context, sku, user, key string, quantity int, answer string, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.answerKey(sku, user, key), strconv.Itoa(quantity)+"|"+answer, ttl).Err(); err != nil {
		return fmt.Errorf("stock: keep: %w", err)
	}
	return nil
}

// Settled is how a reservation ended, for Settle.
type Settled int

// How reservations end.
const (
	// Kept: the database has the reservation's order.
	Kept Settled = iota
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
func (s *RedisStock) Settle(ctx context.Context, sku string, ss []Settlement, limited bool) (int, error) {
	k := s.keys(sku)
	args := append(make([]any, 0, 2+6*len(ss)), group, flag(limited))
	for _, st := range ss {
		args = append(args, st.ID, st.Quantity, st.UserID, st.Key, int(st.How), st.Answer)
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
func (s *RedisStock) Adjust(ctx context.Context, sku string, epoch int64, delta int, user string, limited bool) (bool, error) {
	n, err := adjustScript.Run(ctx, s.rdb, s.keys(sku)[:2], epoch, delta, user, flag(limited)).Int()
	if err != nil {
		return false, fmt.Errorf("stock: adjust: %w", err)
	}
	return n == 1, nil
}

// State is what Redis holds of a SKU.
type State struct {
	Exists    bool
	Epoch     int64
	Available int
	Log       []Reservation // in the order they were made
}

// State reads sku's state and log.
func (s *RedisStock) State(ctx context.Context, sku string) (State, error) {
	k := s.keys(sku)
	v, err := s.rdb.HMGet(ctx, k[0], "epoch", "available").Result()
	if err != nil {
		return State{}, fmt.Errorf("stock: state: %w", err)
	}
	var st State
	if e, ok := v[0].(string); ok {
		st.Exists = true
		st.Epoch, _ = strconv.ParseInt(e, 10, 64)
		a, _ := v[1].(string)
		st.Available, _ = strconv.Atoi(a)
	}
	msgs, err := s.rdb.XRange(ctx, k[2], "-", "+").Result()
	if err != nil {
		return State{}, fmt.Errorf("stock: state: %w", err)
	}
	st.Log = reservations(msgs)
	return st, nil
}

func reservations(msgs []redis.XMessage) []Reservation {
	rs := make([]Reservation, 0, len(msgs))
	for _, m := range msgs {
		r := Reservation{ID: m.ID}
		r.UserID, _ = m.Values["user"].(string)
		r.Key, _ = m.Values["key"].(string)
		q, _ := m.Values["qty"].(string)
		r.Quantity, _ = strconv.Atoi(q)
		r.Saga, _ = m.Values["cart"].(string)
		rs = append(rs, r)
	}
	return rs
}

// Load is a SKU's state as the database has it, for RedisStock.Load.
type Load struct {
	// Token is the fencing token of the job that loads it; 0 for none.
	Token     int64
	Epoch     int64
	Available int
	// Persisted lists the log's entries whose orders the database has.
	Persisted []string
	// Held is what each user holds in the database, when Limited.
	Held    map[string]int
	Limited bool
	// Lookup, for a state built anew, says that the database has orders
	// of the SKU whose keys Redis does not know: each key is looked up in
	// the database before it reserves (ErrLookup). Nil keeps what the
	// state had, unless its available was wrong: then it is set.
	Lookup *bool
	// Dealt says that Available is a bucket's share of the database's
	// stock, which a rebuild may move between buckets: a change of it then
	// is no sign that the state lost writes, and keeps Lookup as it was.
	Dealt bool
}

// Loaded is what Load found and set.
type Loaded struct {
	Before  *int // available before, if there was a state
	After   int  // available after
	Pending int  // reservations in the log that the database does not have
}

// Load sets sku's state from the database. It must run while the database
// row of the SKU's stock is locked, so that no batch commits meanwhile. A
// job whose token is below the last one's gets ErrFenced and changes
// nothing.
func (s *RedisStock) Load(ctx context.Context, sku string, l Load) (Loaded, error) {
	lookup := ""
	switch {
	case l.Lookup != nil:
		lookup = strconv.Itoa(flag(*l.Lookup))
	case l.Dealt:
		lookup = "dealt"
	}
	args := []any{group, l.Token, l.Epoch, l.Available, flag(l.Limited), lookup, len(l.Persisted)}
	for _, id := range l.Persisted {
		args = append(args, id)
	}
	if l.Limited {
		for u, n := range l.Held {
			args = append(args, u, n)
		}
	}
	v, err := loadScript.Run(ctx, s.rdb, s.keys(sku), args...).StringSlice()
	if err == nil {
		err = s.rdb.SAdd(ctx, s.skus(), sku).Err()
	}
	if err != nil {
		return Loaded{}, fmt.Errorf("stock: load: %w", err)
	}
	if v[0] == "fenced" {
		return Loaded{}, fmt.Errorf("%w: %s: token %d, fence %s", ErrFenced, sku, l.Token, v[1])
	}
	var ld Loaded
	if v[1] != "" {
		b, _ := strconv.Atoi(v[1])
		ld.Before = &b
	}
	ld.After, _ = strconv.Atoi(v[2])
	ld.Pending, _ = strconv.Atoi(v[3])
	return ld, nil
}

// Claim takes over sku's reservations that have been pending, in any
// process, for at least idle: their process is dead or stuck. It returns
// the epoch of the state they were taken under, read before the claim: if
// Redis loses them after, a state of a later epoch does not count them.
func (s *RedisStock) Claim(ctx context.Context, sku string, idle time.Duration) (epoch int64, claimed []Reservation, err error) {
	e, err := s.rdb.HGet(ctx, s.keys(sku)[kState], "epoch").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil, nil // no state, so no log: nothing to claim
	}
	if err != nil {
		return 0, nil, fmt.Errorf("stock: claim: %w", err)
	}
	if epoch, err = strconv.ParseInt(e, 10, 64); err != nil {
		return 0, nil, fmt.Errorf("stock: claim: epoch %q: %w", e, err)
	}
	start := "0-0"
	for {
		msgs, next, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: s.keys(sku)[kLog], Group: group, Consumer: s.consumer, MinIdle: idle, Start: start, Count: 100,
		}).Result()
		if err != nil {
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				return epoch, claimed, nil // no log: nothing to claim
			}
			return epoch, claimed, fmt.Errorf("stock: claim: %w", err)
		}
		claimed = append(claimed, reservations(msgs)...)
		if next == "0-0" || next == "" {
			return epoch, claimed, nil
		}
		start = next
	}
}

// SKUs returns the SKUs that have a log.
func (s *RedisStock) SKUs(ctx context.Context) ([]string, error) {
	skus, err := s.rdb.SMembers(ctx, s.skus()).Result()
	if err != nil {
		return nil, fmt.Errorf("stock: skus: %w", err)
	}
	return skus, nil
}

// Forget deletes sku's keys: a new sale starts.
func (s *RedisStock) Forget(ctx context.Context, sku string) error {
	// The fence stays: a token must never pass it again. The orders'
	// answers go, with the orders they name (a SKU is forgotten when it is
	// deleted, or made anew). Refusals stay until they expire: a retry of a
	// request made before gets its first answer again.
	k := s.keys(sku)
	if err := s.rdb.Del(ctx, k[kState], k[kHoldings], k[kLog], k[kKeys]).Err(); err != nil {
		return fmt.Errorf("stock: forget: %w", err)
	}
	return s.rdb.SRem(ctx, s.skus(), sku).Err()
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}
