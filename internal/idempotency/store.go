// Package idempotency makes retried requests safe: a request that carries
// an Idempotency-Key already seen for the same user and endpoint gets the
// first response again instead of acting twice. It follows the IETF draft
// "The Idempotency-Key HTTP Header Field" and the semantics of Stripe's API.
//
// Redis holds the keys: a short-lived pending marker while the first request
// runs, then its final response for the retention period. Redis is the fast
// path, not the guarantee: the orders table's unique (user_id,
// idempotency_key) index is, so an order is never created twice even if
// Redis loses a key. See docs/api.md#idempotency-keys.
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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

// Errors of Store.Begin.
var (
	// ErrInProgress means the first request with this key is still running.
	ErrInProgress = errors.New("idempotency: a request with this key is in progress")
	// ErrKeyReused means the key was first used with a different request.
	ErrKeyReused = errors.New("idempotency: key reused with a different request")
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

// record is what Redis holds under a key.
type record struct {
	Fingerprint string    `json:"fp"`
	Token       string    `json:"token,omitempty"` // set while pending
	Response    *Response `json:"response,omitempty"`
}

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

// NewStore returns a Store on rdb.
func NewStore(rdb redis.UniversalClient, opts *Options) *Store {
	s := &Store{pipe: redispipe.New(rdb)}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.TTL <= 0 {
		s.opts.TTL = 24 * time.Hour
	}
	if s.opts.PendingTTL <= 0 {
		s.opts.PendingTTL = 30 * time.Second
	}
	return s
}

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
	pending, err := json.Marshal(record{Fingerprint: fingerprint, Token: hex.EncodeToString(token)})
	if err != nil {
		return nil, nil, err
	}
	key := s.redisKey(scope)
	v, err := s.pipe.Run(ctx, beginScript, []string{key}, pending, s.opts.PendingTTL.Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return &Claim{key: key, pending: string(pending)}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("idempotency: begin: %w", err)
	}
	var rec record
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		return nil, nil, fmt.Errorf("idempotency: corrupt record %s: %w", key, err)
	}
	switch {
	case rec.Fingerprint != fingerprint:
		return nil, nil, ErrKeyReused
	case rec.Response == nil:
		return nil, nil, ErrInProgress
	default:
		return nil, rec.Response, nil
	}
}

// Complete stores resp as the key's final response.
func (s *Store) Complete(ctx context.Context, c *Claim, fingerprint string, resp Response) error {
	done, err := json.Marshal(record{Fingerprint: fingerprint, Response: &resp})
	if err != nil {
		return err
	}
	return s.finish(ctx, c, string(done))
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

// redisKey hashes the scope, so that no user id or key can collide with
// another's by containing a separator.
func (s *Store) redisKey(sc Scope) string {
	h := sha256.New()
	for _, part := range []string{sc.UserID, sc.Endpoint, sc.Key} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return s.opts.Prefix + "idem:" + hex.EncodeToString(h.Sum(nil))
}
