// Package idempotency makes retried requests safe: a request that carries
// an Idempotency-Key already seen for the same user and endpoint gets the
// first response again instead of acting twice. It follows the IETF draft
// "The Idempotency-Key HTTP Header Field" and the semantics of Stripe's API.
//
// It is the one home of the keys that Redis keeps: their layout (Key),
// their record of the first request's fingerprint and answer (Record,
// Decode), the answers to orders in it (Answer), the hash field under
// which a script keeps a key of a SKU's (Field), and the errors a key
// answers with (ErrKeyReused, ErrInProgress), whoever keeps the key: this
// package's Store and Middleware, for refunds, cancels and adjustments;
// the order service, for orders; and the scripts of a stock kept in
// Redis, which read and write the same records.
//
// The Store holds a short-lived pending marker while the first request
// runs, then its final response for the retention period. Redis is the fast
// path, not the guarantee: the database's unique indexes on the keys are,
// so a request never acts twice even if Redis loses a key. See
// docs/api.md#idempotency-keys.
package idempotency

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/redispipe"
)

var (
	//go:embed begin.lua
	beginLua    string
	beginScript = redis.NewScript(beginLua)
	//go:embed finish.lua
	finishLua    string
	finishScript = redis.NewScript(finishLua)
)

// Scope names one key: the user, the endpoint (route pattern) and the key.
type Scope struct {
	UserID   string
	Endpoint string
	Key      string
}

// Response is a stored final response.
type Response struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Location    string `json:"location,omitempty"`
	Body        []byte `json:"body"`
}

// A Store's answer, in its record (Record), is its final Response in
// JSON, or, while its first request runs, pending and that request's
// token.
const pending = "pending:"

// Options tune a Store; the zero value is valid.
type Options struct {
	// Prefix is put before every Redis key.
	Prefix string
	// TTL is how long a final response is kept (default 24h).
	TTL time.Duration
	// PendingTTL bounds how long a crashed request blocks its key (default
	// 30s). It must outlast the longest request.
	PendingTTL time.Duration
}

// Store keeps idempotency records in Redis. Each request costs two
// scripts, its key's claim and its answer; those of concurrent requests go
// to Redis together, in pipelines.
type Store struct {
	pipe *redispipe.Pipe
	opts Options
}

// DefaultTTL is how long a key's final answer is kept unless its keeper
// is told otherwise.
const DefaultTTL = 24 * time.Hour

// TTL is how long a keeper told to keep answers for d keeps them: d, or
// DefaultTTL when d is not positive.
func TTL(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTTL
	}
	return d
}

// NewStore returns a Store on rdb.
func NewStore(rdb redis.UniversalClient, opts *Options) *Store {
	s := &Store{pipe: redispipe.New(rdb)}
	if opts != nil {
		s.opts = *opts
	}
	s.opts.TTL = TTL(s.opts.TTL)
	if s.opts.PendingTTL <= 0 {
		s.opts.PendingTTL = 30 * time.Second
	}
	return s
}

// Close waits for the pipelines under way; the store's owner calls it
// before it closes rdb.
func (s *Store) Close() { s.pipe.Close() }

// Claim is a pending key held by the request that made it.
type Claim struct {
	key     string
	pending string
}

// Begin claims scope for a request whose canonical form hashes to
// fingerprint. It returns a Claim when the request is new, the stored
// Response when it already completed, ErrInProgress while the first request
// still runs, and ErrKeyReused when the key was used for another request.
func (s *Store) Begin(ctx context.Context, scope Scope, fingerprint string) (*Claim, *Response, error) {
	token := make([]byte, 16)
	rand.Read(token)
	mine := Record(fingerprint, pending+hex.EncodeToString(token))
	key := Key(s.opts.Prefix, "idem"+scope.Endpoint, scope.UserID, scope.Key)
	v, err := s.pipe.Run(ctx, beginScript, []string{key}, mine, s.opts.PendingTTL.Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return &Claim{key: key, pending: mine}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("idempotency: begin: %w", err)
	}
	first, answer, ok := Decode(v)
	switch {
	case !ok:
		return nil, nil, fmt.Errorf("idempotency: corrupt record %s: %q", key, v)
	case first != fingerprint:
		return nil, nil, ErrKeyReused
	case strings.HasPrefix(answer, pending):
		return nil, nil, ErrInProgress
	}
	var resp Response
	if err := json.Unmarshal([]byte(answer), &resp); err != nil {
		return nil, nil, fmt.Errorf("idempotency: corrupt record %s: %w", key, err)
	}
	return nil, &resp, nil
}

// Complete stores resp as the key's final response.
func (s *Store) Complete(ctx context.Context, c *Claim, fingerprint string, resp Response) error {
	done, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	return s.finish(ctx, c, Record(fingerprint, string(done)))
}

// Abandon drops the claim, so that the key can be retried: the request
// decided nothing.
func (s *Store) Abandon(ctx context.Context, c *Claim) error {
	return s.finish(ctx, c, "")
}

func (s *Store) finish(ctx context.Context, c *Claim, final string) error {
	err := s.pipe.Run(ctx, finishScript, []string{c.key}, c.pending, final, s.opts.TTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("idempotency: finish: %w", err)
	}
	return nil
}
