package lua

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/groupcommit"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/lua/redisstock"
	"github.com/stockguard/shop/internal/order"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/logrepeat"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// Lua is the fast path: Redis decides, the database records. One Lua
// script checks the SKU's Redis state, takes the units and logs the
// reservation in the SKU's stream (redisstock.Stock.Reserve); the
// group-commit writer persists reservations in batches, where the
// database's conditional UPDATE refuses rather than oversells; and the
// buyer is answered once the order is committed. The stream is the
// recovery log (reconcile.go), and a Redis state of another epoch, or
// none, is built again from the database before it sells. See
// docs/strategies.md.
type Lua struct {
	db        *gorm.DB
	redis     *redisstock.Stock
	w         *groupcommit.Writer[reservation]
	single    stock.Guard // the database side of refunds
	reads     *order.FirstReads
	rules     order.Rules // of the reservations it claims from dead processes
	idle      time.Duration
	answerTTL time.Duration // how long a final answer is stored
	buckets   int           // each SKU's Redis stock is split into (buckets.go)
	log       *slog.Logger
	// redisFailed logs the failed Redis calls of dropped, each op at most once
	// per interval, with a count.
	redisFailed *logrepeat.Suppressor

	hooks hooks // none, but in tests (export_test.go)

	rebuilding chan struct{} // one rebuild at a time in this process
	mu         sync.Mutex
	epochs     map[string]int64         // each SKU's epoch, as last read or built
	reading    map[string]chan struct{} // closed when the SKU's epoch read ends
	fixing     map[string]bool
	closed     bool           // by Close: no fix starts again
	fixes      sync.WaitGroup // the fixes under way
	// flights are the reservations it holds and persists (flights.go),
	// under flying.
	flying  sync.Mutex
	flights map[flight]*groupcommit.Request[reservation]
	// failures counts the Redis failures this process has seen, and
	// checked, by SKU, the count when its state was last checked against
	// the database (behind.go); server is the Redis server it last dialled.
	failures uint64
	checked  map[string]uint64
	server   string
}

// hooks are the points at which a test steps into a cart's saga, each
// nil but in tests, which set them through export_test.go.
type hooks struct {
	// betweenLines runs before each line of a saga: a test's way to fail
	// a store between two lines.
	betweenLines func(line int)
	// cartPlaced runs once a batch of carts has committed, before their
	// sagas end: a test's way in between the two.
	cartPlaced func()
}

// Options configure Lua; nil is valid.
type Options struct {
	Prefix string // of every Redis key
	// Rules are the per-user limit and the payment window: the reservations
	// claimed from dead processes become orders under them, as the
	// service places orders (order.Placement.Rules).
	Rules order.Rules
	// ClaimIdle is how long a reservation stays pending before Reconcile
	// takes it from its process as dead. It must outlast the longest a
	// live process takes to persist one. Default 30s.
	ClaimIdle time.Duration
	// AnswerTTL is how long a buyer's final answer is kept under its
	// Idempotency-Key. Default 24h.
	AnswerTTL time.Duration
	// Buckets splits each SKU's Redis stock into this many buckets, each
	// under a hash tag of its own, so that one hot SKU spreads over the
	// masters of a Redis Cluster. Default 1. See
	// docs/strategies.md#buckets.
	Buckets int
	// Log is where the Redis failures that no buyer hears of are told;
	// nil is slog.Default().
	Log *slog.Logger
}

// OptionsOf is the options that cfg, the shop's configuration, sets,
// with the rules made of it.
func OptionsOf(cfg config.Config, rules order.Rules) *Options {
	return &Options{Prefix: cfg.RedisPrefix, Rules: rules,
		ClaimIdle: cfg.ClaimIdle, AnswerTTL: cfg.IdempotencyTTL, Buckets: cfg.SKUBuckets}
}

// reservation is what lua keeps with each order it queues for the
// group-commit writer: the reservation's id in its SKU's stream, and the
// Redis stock it was taken from, the SKU or one of its buckets
// (redisstock.BucketOf); of a cart, its saga and the buckets that hold its
// lines (luacart.go). foreign says that another process holds it in the
// log, and a buyer's retry persists it here (flights.go).
type reservation struct {
	entry, bucket string
	foreign       bool
	saga          string
	held          []string
}

// New returns the fast path on gdb and rdb. It hooks rdb to hear of its
// failures (behind.go).
func New(gdb *gorm.DB, rdb redis.UniversalClient, opts *Options) *Lua {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = 30 * time.Second
	}
	o.AnswerTTL = idempotency.TTL(o.AnswerTTL)
	o.Buckets = max(o.Buckets, 1)
	l := &Lua{db: gdb, redis: redisstock.New(rdb, o.Prefix), single: stock.NewAtomic(gdb), reads: order.NewFirstReads(gdb),
		rules: o.Rules, idle: o.ClaimIdle, answerTTL: o.AnswerTTL, buckets: o.Buckets, log: cmp.Or(o.Log, slog.Default()), redisFailed: &logrepeat.Suppressor{Logger: cmp.Or(o.Log, slog.Default())}, rebuilding: make(chan struct{}, 1),
		epochs: make(map[string]int64), reading: make(map[string]chan struct{}), fixing: make(map[string]bool), checked: make(map[string]uint64),
		flights: make(map[flight]*groupcommit.Request[reservation])}
	l.w = groupcommit.NewWriter(gdb, "lua", groupcommit.Mode{Rules: o.Rules, Held: true}, l.settle, l.settleCarts)
	rdb.AddHook(watch{l})
	for _, result := range []string{"persisted", "released"} {
		metrics.LuaClaimed.WithLabelValues(result)
	}
	for _, op := range []string{"keep", "settle", "cart-done", "adjust", "rebuild"} {
		metrics.LuaRedisErrors.WithLabelValues(op)
	}
	for _, reason := range []string{"missing", "epoch", "drift"} {
		metrics.LuaCorrections.WithLabelValues(reason)
	}
	return l
}

// Place implements Placer: one script claims the buyer's key and
// reserves in Redis (redisstock.Stock.Reserve), then the writer persists.
// A key already answered gets its answer again. Redis's refusals are
// final, and kept by the script; the database's are checked against the
// key's order, and kept here.
func (l *Lua) Place(ctx context.Context, r order.PlaceRequest) (order.Order, bool, error) {
	res := redisstock.Reservation{UserID: r.UserID, Key: r.IdempotencyKey, Quantity: r.Quantity}
	lookedUp := false
	var over *redisstock.OverLimitError
	var pending *redisstock.InProgressError
	doubts := 0
	route := l.route(r.SKU, r.UserID)
	doubted := false // a bucket tried on this route was short in doubt
	for attempt := 0; ; attempt++ {
		epoch, err := l.epoch(ctx, r.SKU)
		if err != nil {
			return order.Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, err)
		}
		refusals := redisstock.Refusals{TTL: l.answerTTL, SoldOut: order.StoredSoldOut, OverLimit: order.StoredLimit(l.rules.Limit)}
		if len(route) > 1 || doubted {
			refusals.SoldOut = "" // one bucket's sold out is not the SKU's
		}
		terms := redisstock.Terms{Epoch: epoch, Limit: l.rules.Limit, LookedUp: lookedUp, TakeOver: l.idle, Refusals: refusals}
		seen := l.count()
		id, answer, err := l.redis.Reserve(ctx, route[0], res, terms)
		switch {
		case (errors.Is(err, stock.ErrSoldOut) || errors.As(err, &over)) && l.count() > seen && attempt < 3:
			// Redis failed, or moved, during the call: the refusal may come
			// from a state behind the database. It is forgotten, and the
			// state checked (epoch) before Redis is asked again.
			if err := l.redis.Unkeep(ctx, route[0], r.UserID, r.IdempotencyKey); err != nil {
				return order.Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, err)
			}
		case err == nil && id == "":
			a := order.ReplayStored(answer, r)
			return a.Order, a.Replayed, a.Err
		case err == nil, errors.As(err, &pending):
			// Its reservation, or its key's earlier one (another process
			// holds it, or this one persists it already), committed or
			// waited for (flights.go); the earlier one's order is replayed.
			meta := reservation{entry: id, bucket: route[0]}
			if pending != nil {
				meta = reservation{entry: pending.ID, bucket: route[0], foreign: true}
			}
			o, replayed, err := l.send(&groupcommit.Request[reservation]{Ctx: ctx, Order: r, Epoch: epoch, Meta: meta})
			replayed = replayed || (err == nil && pending != nil)
			o, replayed, err = l.reads.CheckRefusal(ctx, r, o, replayed, err)
			return o, replayed, l.storeRefusal(ctx, r, err)
		case errors.Is(err, redisstock.ErrLookup) && !lookedUp:
			// The key may have an order that Redis does not know of: find
			// it before taking stock that a new buyer then misses.
			if o, found, err := order.ReplayOr(ctx, l.db, r, nil); found || err != nil {
				return o, found, l.storeRefusal(ctx, r, err)
			}
			lookedUp = true
		case errors.Is(err, redisstock.ErrStale) && attempt < 3:
			if err := l.refresh(ctx, r.SKU, epoch); errors.Is(err, stock.ErrNotFound) {
				return order.Order{}, false, l.storeRefusal(ctx, r, order.NotFound(r.SKU))
			} else if err != nil {
				return order.Order{}, false, fmt.Errorf("order: place: %w", err)
			}
		case (errors.Is(err, stock.ErrSoldOut) || errors.Is(err, redisstock.ErrInDoubt)) && len(route) > 1:
			doubted = doubted || errors.Is(err, redisstock.ErrInDoubt)
			route = route[1:] // the next bucket
			attempt--
		case errors.Is(err, redisstock.ErrInDoubt) || (errors.Is(err, stock.ErrSoldOut) && doubted):
			// Units in flight, which may yet come back, would fill it: ask
			// every bucket again shortly.
			if err := waitOutDoubt(ctx, &doubts); err != nil {
				return order.Order{}, false, err
			}
			route, doubted = l.route(r.SKU, r.UserID), false
			attempt--
		case errors.Is(err, stock.ErrSoldOut) && refusals.SoldOut != "":
			return order.Order{}, false, order.SoldOut(r.SKU) // the script kept it
		case errors.Is(err, stock.ErrSoldOut):
			return order.Order{}, false, l.storeRefusal(ctx, r, order.SoldOut(r.SKU))
		case errors.As(err, &over):
			return order.Order{}, false, order.LimitReached(r.UserID, r.SKU, over.Held, l.rules.Limit)
		case errors.Is(err, idempotency.ErrInProgress), errors.Is(err, idempotency.ErrKeyReused):
			return order.Order{}, false, fmt.Errorf("order: place: %w", err)
		default: // Redis is down, or the state keeps changing: nothing was taken
			return order.Order{}, false, fmt.Errorf("order: place: %w: %w", stock.ErrBusy, err)
		}
	}
}

// KeepFirst implements order.KeepFirst, in the buyer's home bucket, where
// its answers are kept. Should Redis fail, nothing is kept.
func (l *Lua) KeepFirst(ctx context.Context, r order.PlaceRequest, answer string) (order.Answer, bool) {
	record, found, err := l.redis.KeepFirst(ctx, l.route(r.SKU, r.UserID)[0], r.UserID, r.IdempotencyKey, r.Quantity, answer, l.answerTTL)
	l.dropped(ctx, "keep", err)
	if !found {
		return order.Answer{}, false
	}
	first, kept, ok := idempotency.Decode(record)
	if ok && first != strconv.Itoa(r.Quantity) {
		return order.Answer{Err: fmt.Errorf("order: place: %w: its first request was for %s units", idempotency.ErrKeyReused, first)}, true
	}
	return order.ReplayStored(kept, r), true
}

// route is the order in which a buyer tries sku's buckets: its home
// bucket, a hash of the buyer, where its answers are kept too, then every
// other, from a random one on. So a buyer hears sold out only once every
// bucket was empty when tried, and buys while any bucket has stock. With
// one bucket it is the SKU.
func (l *Lua) route(sku, user string) []string {
	if l.buckets < 2 {
		return []string{sku}
	}
	h := fnv.New32a()
	h.Write([]byte(user))
	home := int(h.Sum32() % uint32(l.buckets))
	start := rand.IntN(l.buckets - 1)
	route := make([]string, 0, l.buckets)
	route = append(route, redisstock.BucketOf(sku, home))
	for i := range l.buckets - 1 {
		route = append(route, redisstock.BucketOf(sku, (home+1+(start+i)%(l.buckets-1))%l.buckets))
	}
	return route
}

// storeRefusal keeps err, when it is a final refusal that no script kept,
// as r's answer, and returns it. Should Redis fail, a retry asks again.
func (l *Lua) storeRefusal(ctx context.Context, r order.PlaceRequest, err error) error {
	l.dropped(ctx, "keep", order.KeepRefusal(ctx, err, func(ctx context.Context, answer string) error {
		return l.redis.Store(ctx, l.route(r.SKU, r.UserID)[0], r.UserID, r.IdempotencyKey, r.Quantity, answer, l.answerTTL)
	}))
	return err
}

// settle runs once a batch has committed: its reservations are in the
// database now, or were refused, and leave the stream.
func (l *Lua) settle(ctx context.Context, sku string, batch []*groupcommit.Request[reservation], answers []order.Answer) {
	l.landed(batch)
	ss := make([]redisstock.Settlement, 0, len(batch))
	refused := false
	settles := settlers(batch, answers)
	for i, p := range batch {
		if !settles[i] {
			continue
		}
		ss = append(ss, redisstock.Settlement{})
		s := &ss[len(ss)-1]
		s.Bucket = p.Meta.bucket
		s.Reservation = redisstock.Reservation{ID: p.Meta.entry, UserID: p.Order.UserID, Key: p.Order.IdempotencyKey, Quantity: p.Order.Quantity}
		// An order is its buyer's answer, kept with its XACK. A refusal
		// is kept once place has checked it against the key's order.
		if answers[i].Err == nil {
			s.Answer, _ = order.Stored(answers[i])
		}
		// A replay gives its units back: the key's order took units of its
		// own. Should that order be this very reservation's (its commit's
		// answer was lost), Redis then holds a unit more than the database,
		// which refuses it, and reconcile corrects it: too many in Redis,
		// never too few.
		switch a := answers[i]; {
		case a.Err == nil && a.Replayed:
			s.How = redisstock.Replayed
		case a.Err == nil:
			s.How = redisstock.Persisted
		default:
			s.How = redisstock.Released
			refused = refused || errors.Is(a.Err, stock.ErrSoldOut) || errors.Is(a.Err, order.ErrLimitReached)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, order.RedisTimeout)
	defer cancel()
	// Should it fail, they stay pending and are claimed and settled later.
	for bucket, ss := range byBucket(sku, ss) {
		_, err := l.redis.Settle(ctx, bucket, ss, l.rules.Limit > 0)
		l.dropped(ctx, "settle", err)
	}
	if refused {
		// Redis granted what the database refused: its state is stale.
		l.fix(sku)
	}
}

// byBucket groups settlements by the bucket their reservations were
// taken from.
func byBucket(sku string, ss []redisstock.Settlement) map[string][]redisstock.Settlement {
	by := make(map[string][]redisstock.Settlement, 1)
	for _, s := range ss {
		b := cmp.Or(s.Bucket, sku)
		by[b] = append(by[b], s)
	}
	return by
}

// dropped logs and counts a Redis call that failed where no buyer waits
// for it: what it would have written is set right later.
func (l *Lua) dropped(ctx context.Context, op string, err error) {
	if err == nil {
		return
	}
	metrics.LuaRedisErrors.WithLabelValues(op).Inc()
	l.redisFailed.Log(ctx, slog.LevelWarn, op, "lua: a Redis call failed; it is set right later", slog.String("op", op), slog.Any("err", err))
}

// fix builds the SKU's state again in the background, once at a time.
func (l *Lua) fix(sku string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fixing[sku] || l.closed {
		return
	}
	l.fixing[sku] = true
	l.fixes.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), order.RedisTimeout)
		defer cancel()
		_, err := l.rebuild(ctx, sku, 0)
		l.dropped(ctx, "rebuild", err) // Reconcile tries again
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.fixing, sku)
	})
}

// Placement is what the service places through under lua: every step is
// its own. It keeps its buyers' Idempotency-Keys itself: Reserve claims
// the key, and the writer keeps the answer with its XACK. Its
// reconciliation is the app's to run.
func (l *Lua) Placement() order.Placement {
	return order.Placement{Guard: l, Rules: l.rules, Placer: l, Carts: l, StoresKeys: true, KeepFirst: l.KeepFirst, Refunder: l, Restocker: l, Sale: l, Close: l.Close,
		Reconcile: func(ctx context.Context, token int64) (order.Reconciliation, error) { return l.Reconcile(ctx, token) }}
}

// Close answers the buyers its writer holds and waits for the work it
// runs in the background: the writers, the first reads and the fixes. The
// reservations its writer was trying again stay pending, for the claim. A
// buyer who comes after it is answered busy.
func (l *Lua) Close() {
	l.w.Close()
	l.reads.Close()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.fixes.Wait()
	l.redis.Close()
}
