package redisstock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stockguard/shop/internal/stock"

	"github.com/redis/go-redis/v9"
)

// A cart's lines in Redis: cart.lua reserves them, all or none, in one
// step when their keys share one hash slot (SameSlot), and otherwise one
// by one, as a saga whose compensation, give.lua, returns the lines
// reserved so far when a later one is refused. Both run behind a barrier
// per saga and line. See docs/orders.md#carts.

var (
	//go:embed cart.lua
	cartLua    string
	cartScript = redis.NewScript(doubtLua + cartLua)
	//go:embed give.lua
	giveLua    string
	giveScript = redis.NewScript(giveLua)
	//go:embed lacks.lua
	lacksLua    string
	lacksScript = redis.NewScript(doubtLua + lacksLua)
)

// ErrGivenBack means a saga's line was given back before it was reserved,
// or after its cart was persisted: it must not be reserved now.
var ErrGivenBack = errors.New("stock: the cart's line was given back first")

// ErrInDoubt means a buyer, or a cart's line, was short while its SKU's
// log held reservations that would fill it and may yet give their units
// back (doubt.lua): the answer may change soon, and sold out would be
// premature.
var ErrInDoubt = errors.New("stock: short while reservations are in flight")

// Cart is a buyer's cart as Redis reserves it: whose, under which
// Idempotency-Key, and the saga that owns its reservations.
type Cart struct {
	UserID string
	Key    string
	Saga   string // unique per attempt: the barrier's id
	Limit  int    // per user and SKU; 0 for none
}

// CartLine is one line to reserve, in the epoch of its SKU's state.
type CartLine struct {
	SKU      string
	Epoch    int64
	Quantity int
}

// LineError is a refusal of one line of a cart: ErrStale, ErrGivenBack,
// or *OverLimitError.
type LineError struct {
	SKU string
	Err error
}

func (e *LineError) Error() string { return fmt.Sprintf("%v: %s", e.Err, e.SKU) }
func (e *LineError) Unwrap() error { return e.Err }

// ReserveCart reserves lines of c in one step, all or none, and returns
// each line's entry in its SKU's log, pending for this process. Their keys
// must share one hash slot, unless lines is one line of a saga. A line
// reserved already under c.Saga is not reserved again: its entry is
// returned. It refuses with a *ShortError naming every short SKU (wrapped
// in ErrInDoubt when reservations in flight may yet free the units), or a
// *LineError.
func (s *Stock) ReserveCart(ctx context.Context, c Cart, lines []CartLine) ([]string, error) {
	keys := make([]string, 0, 4*len(lines))
	args := make([]any, 0, 6+2*len(lines))
	args = append(args, group, s.consumer, c.UserID, c.Key, c.Limit, c.Saga)
	for _, l := range lines {
		k := s.keys(l.SKU)
		keys = append(keys, k[kState], k[kHoldings], k[kLog], k[kKeys])
		args = append(args, l.Epoch, l.Quantity)
	}
	v, err := s.pipe.Run(ctx, cartScript, keys, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("stock: reserve cart: %w", err)
	}
	return parseCart(v, lines)
}

// parseCart parses cart.lua's reply v to lines: every line's entry, or
// the refusal. A reply it does not know is ErrUnknownReply.
func parseCart(v []string, lines []CartLine) ([]string, error) {
	unknown := fmt.Errorf("%w: reserve cart: %q", ErrUnknownReply, v)
	nums := make([]int, 0, len(v))
	for i, s := range v {
		if i == 0 || (v[0] == "ok") {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, unknown
		}
		nums = append(nums, n)
	}
	line := func(n int) (string, bool) {
		if n < 1 || n > len(lines) {
			return "", false
		}
		return lines[n-1].SKU, true
	}
	switch {
	case len(v) == len(lines)+1 && v[0] == "ok":
		return v[1:], nil
	case len(v) >= 3 && v[0] == "sold-out" && nums[0] <= 1:
		short := make([]string, len(nums)-1)
		for i, n := range nums[1:] {
			var ok bool
			if short[i], ok = line(n); !ok {
				return nil, unknown
			}
		}
		if nums[0] == 1 {
			return nil, fmt.Errorf("%w: %w", ErrInDoubt, &stock.ShortError{SKUs: short})
		}
		return nil, &stock.ShortError{SKUs: short}
	case len(v) == 2 && (v[0] == "stale" || v[0] == "given-back"):
		sku, ok := line(nums[0])
		if !ok {
			return nil, unknown
		}
		if v[0] == "stale" {
			return nil, &LineError{SKU: sku, Err: ErrStale}
		}
		return nil, &LineError{SKU: sku, Err: ErrGivenBack}
	case len(v) == 3 && v[0] == "limit":
		sku, ok := line(nums[0])
		if !ok {
			return nil, unknown
		}
		return nil, &LineError{SKU: sku, Err: &OverLimitError{Held: nums[1]}}
	}
	return nil, unknown
}

// GiveBack is a saga's compensation for its line of sku: the units that
// ReserveCart took go back, once. It returns the units given back: 0 when
// the line was never reserved (and now never will be), or its entry was
// gone; -1 when it was given back already; -2 when the cart was persisted,
// which gives nothing back.
func (s *Stock) GiveBack(ctx context.Context, sku, saga string, limited bool) (int, error) {
	return s.endLine(ctx, sku, saga, limited, false)
}

// CartDone ends the reservation of a saga's line of sku once the database
// has the cart: the entry leaves the log, and the barrier says done, so
// that no give-back returns its units.
func (s *Stock) CartDone(ctx context.Context, sku, saga string) error {
	_, err := s.endLine(ctx, sku, saga, false, true)
	return err
}

func (s *Stock) endLine(ctx context.Context, sku, saga string, limited, done bool) (int, error) {
	k := s.keys(sku)
	n, err := s.pipe.Run(ctx, giveScript, []string{k[kState], k[kHoldings], k[kLog], k[kKeys]}, group, saga, flag(limited), flag(done)).Int()
	if err != nil {
		return 0, fmt.Errorf("stock: end cart line: %w", err)
	}
	return n, nil
}

// Lacks reports whether sku's Redis state has fewer than qty units left,
// and whether that is in doubt: units in its log, which may yet come
// back, would fill it (doubt.lua). With no state it lacks nothing.
func (s *Stock) Lacks(ctx context.Context, sku string, qty int) (short, doubt bool, err error) {
	k := s.keys(sku)
	v, err := lacksScript.Run(ctx, s.rdb, []string{k[kState], k[kLog]}, qty).Int64Slice()
	if err != nil {
		return false, false, err
	}
	if len(v) != 2 {
		return false, false, fmt.Errorf("stock: lacks %s: %w", sku, ErrUnknownReply)
	}
	return v[0] == 1, v[1] == 1, nil
}

// SameSlot reports whether the keys of every SKU in skus are in one hash
// slot: always on one Redis server; on a Redis Cluster, when they share a
// sale tag ("{spring}a", "{spring}b").
func (s *Stock) SameSlot(skus []string) bool {
	if _, cluster := s.rdb.(*redis.ClusterClient); !cluster {
		return true
	}
	for _, sku := range skus[1:] {
		if slot(s.tagged(sku)) != slot(s.tagged(skus[0])) {
			return false
		}
	}
	return true
}

// slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
