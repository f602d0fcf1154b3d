package redisstock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/shop/internal/stock"

	"github.com/redis/go-redis/v9"
)

// What lua's recovery reads and writes of the Redis stock: a SKU's state,
// its load from the database, and the reservations claimed from dead
// processes.

// State is what Redis holds of a SKU.
type State struct {
	Exists    bool
	Epoch     int64
	Available int
	Log       []Reservation // in the order they were made
}

// State reads sku's state and log.
func (s *Stock) State(ctx context.Context, sku string) (State, error) {
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

// Load is a SKU's state as the database has it, for Stock.Load.
type Load struct {
	// Token is the fencing token of the job that loads it; 0 for none.
	Token     int64
	Epoch     int64
	Available int
	// Persisted lists the log's entries whose orders the database has,
	// each with the answer its order is (order.Stored).
	Persisted []Settlement
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
func (s *Stock) Load(ctx context.Context, sku string, l Load) (Loaded, error) {
	lookup := ""
	switch {
	case l.Lookup != nil:
		lookup = strconv.Itoa(flag(*l.Lookup))
	case l.Dealt:
		lookup = "dealt"
	}
	args := []any{group, l.Token, l.Epoch, l.Available, flag(l.Limited), lookup, len(l.Persisted)}
	for _, p := range l.Persisted {
		args = append(args, p.ID, p.field(), p.record(p.Answer))
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
	return parseLoad(v, sku, l.Token)
}

// parseLoad parses load.lua's reply v for sku, loaded by a job of token.
// A reply it does not know is ErrUnknownReply.
func parseLoad(v []string, sku string, token int64) (Loaded, error) {
	unknown := fmt.Errorf("%w: load: %q", ErrUnknownReply, v)
	switch {
	case len(v) == 2 && v[0] == "fenced":
		return Loaded{}, fmt.Errorf("%w: %s: token %d, fence %s", stock.ErrFenced, sku, token, v[1])
	case len(v) != 4 || v[0] != "ok":
		return Loaded{}, unknown
	}
	var ld Loaded
	var err error
	if v[1] != "" {
		b, e := strconv.Atoi(v[1])
		ld.Before, err = &b, e
	}
	after, errA := strconv.Atoi(v[2])
	pending, errP := strconv.Atoi(v[3])
	if err != nil || errA != nil || errP != nil {
		return Loaded{}, unknown
	}
	ld.After, ld.Pending = after, pending
	return ld, nil
}

// Claim takes over sku's reservations that have been pending, in any
// process, for at least idle: their process is dead or stuck. It returns
// the epoch of the state they were taken under, read before the claim: if
// Redis loses them after, a state of a later epoch does not count them.
func (s *Stock) Claim(ctx context.Context, sku string, idle time.Duration) (epoch int64, claimed []Reservation, err error) {
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
func (s *Stock) SKUs(ctx context.Context) ([]string, error) {
	skus, err := s.rdb.SMembers(ctx, s.skus()).Result()
	if err != nil {
		return nil, fmt.Errorf("stock: skus: %w", err)
	}
	return skus, nil
}

// Forget deletes sku's keys: a new sale starts.
func (s *Stock) Forget(ctx context.Context, sku string) error {
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
