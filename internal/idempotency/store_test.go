package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/testinfra"
)

func newStore(t *testing.T, opts idempotency.Options) *idempotency.Store {
	t.Helper()
	r := testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	opts.Prefix = r.Prefix
	return idempotency.NewStore(rdb, &opts)
}

// TestStoreLifecycle walks one key through its states on a real Redis.
func TestStoreLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t, idempotency.Options{})
	scope := idempotency.Scope{UserID: "u", Endpoint: "POST /api/v1/orders", Key: "k"}

	claim, stored, err := s.Begin(ctx, scope, "fp1")
	if claim == nil || stored != nil || err != nil {
		t.Fatalf("first Begin: %v %v %v, want a claim", claim, stored, err)
	}
	if _, _, err := s.Begin(ctx, scope, "fp1"); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("Begin while pending: %v, want ErrInProgress", err)
	}
	if _, _, err := s.Begin(ctx, scope, "fp2"); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("Begin with another request while pending: %v, want ErrKeyReused", err)
	}
	other := scope
	other.UserID = "v"
	if c, _, err := s.Begin(ctx, other, "fp2"); c == nil || err != nil {
		t.Fatalf("same key, other user: %v %v, want its own claim", c, err)
	}

	want := idempotency.Response{Status: 201, ContentType: "application/json", Location: "/x", Body: []byte(`{"id":1}`)}
	if err := s.Complete(ctx, claim, "fp1", want); err != nil {
		t.Fatal(err)
	}
	_, stored, err = s.Begin(ctx, scope, "fp1")
	if err != nil || stored == nil || stored.Status != want.Status || string(stored.Body) != string(want.Body) || stored.Location != want.Location {
		t.Fatalf("Begin after Complete: %+v %v, want %+v", stored, err, want)
	}
	if _, _, err := s.Begin(ctx, scope, "fp2"); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("Begin with another request after Complete: %v, want ErrKeyReused", err)
	}
}

// TestStoreAbandon: a request that decided nothing frees its key.
func TestStoreAbandon(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t, idempotency.Options{})
	scope := idempotency.Scope{UserID: "u", Endpoint: "e", Key: "k"}
	claim, _, err := s.Begin(ctx, scope, "fp")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Abandon(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if c, _, err := s.Begin(ctx, scope, "fp"); c == nil || err != nil {
		t.Fatalf("Begin after Abandon: %v %v, want a new claim", c, err)
	}
}

// TestStorePendingExpires: a request that crashed while pending blocks its
// key only until the pending TTL; its late Complete cannot overwrite the
// request that took the key over.
func TestStorePendingExpires(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t, idempotency.Options{PendingTTL: 200 * time.Millisecond})
	scope := idempotency.Scope{UserID: "u", Endpoint: "e", Key: "k"}
	crashed, _, err := s.Begin(ctx, scope, "fp")
	if err != nil {
		t.Fatal(err)
	}
	var next *idempotency.Claim
	for deadline := time.Now().Add(10 * time.Second); next == nil; time.Sleep(50 * time.Millisecond) {
		next, _, err = s.Begin(ctx, scope, "fp")
		if err != nil && !errors.Is(err, idempotency.ErrInProgress) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the crashed request's marker did not expire")
		}
	}
	if err := s.Complete(ctx, crashed, "fp", idempotency.Response{Status: 500}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Begin(ctx, scope, "fp"); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("after the stale Complete: %v, want the new request still in progress", err)
	}
}

// TestStoreConcurrent: the claims of concurrent requests, which go to Redis
// in shared pipelines, are each answered on their own, and a Redis
// restarted empty, which has lost the scripts too, still answers.
func TestStoreConcurrent(t *testing.T) {
	t.Parallel()
	srv := testinfra.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	s := idempotency.NewStore(rdb, nil)

	const requests = 200
	claims := make(chan *idempotency.Claim, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			c, stored, err := s.Begin(t.Context(), idempotency.Scope{UserID: "u", Endpoint: "e", Key: fmt.Sprint(i)}, "fp")
			if c == nil || stored != nil || err != nil {
				t.Errorf("Begin %d: %v %v %v, want a claim", i, c, stored, err)
			}
			claims <- c
		})
	}
	wg.Wait()
	close(claims)
	for c := range claims {
		if c != nil {
			if err := s.Complete(t.Context(), c, "fp", idempotency.Response{Status: 201}); err != nil {
				t.Error(err)
			}
		}
	}
	for i := range requests {
		if _, stored, err := s.Begin(t.Context(), idempotency.Scope{UserID: "u", Endpoint: "e", Key: fmt.Sprint(i)}, "fp"); stored == nil || stored.Status != 201 {
			t.Fatalf("key %d after Complete: %+v %v, want the stored 201", i, stored, err)
		}
	}

	srv.Kill() // no snapshot: it restarts empty
	srv.Start()
	if n, err := rdb.DBSize(t.Context()).Result(); err != nil || n != 0 {
		t.Fatalf("Redis restarted with %d keys (%v), want none", n, err)
	}
	scope := idempotency.Scope{UserID: "u", Endpoint: "e", Key: "0"}
	c, _, err := s.Begin(t.Context(), scope, "fp")
	if c == nil || err != nil {
		t.Fatalf("Begin once Redis restarted empty: %v %v, want a claim", c, err)
	}
	if err := s.Complete(t.Context(), c, "fp", idempotency.Response{Status: 201}); err != nil {
		t.Fatal(err)
	}
	if _, stored, err := s.Begin(t.Context(), scope, "fp"); stored == nil || err != nil {
		t.Errorf("replay once Redis restarted empty: %+v %v", stored, err)
	}
}

// TestStoreCancelled: a request whose ctx has ended claims nothing.
func TestStoreCancelled(t *testing.T) {
	t.Parallel()
	s := newStore(t, idempotency.Options{})
	scope := idempotency.Scope{UserID: "u", Endpoint: "e", Key: "k"}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.Begin(ctx, scope, "fp"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin with an ended ctx: %v, want context.Canceled", err)
	}
	if c, _, err := s.Begin(t.Context(), scope, "fp"); c == nil || err != nil {
		t.Errorf("Begin after it: %v %v, want a claim: the ended request claimed the key", c, err)
	}
}

// TestStoreKeepsRecords: the Store keeps its answers as every keeper of
// keys does: a record (idempotency.Decode) under idempotency.Key, scoped
// by "idem" and the endpoint.
func TestStoreKeepsRecords(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	s := idempotency.NewStore(rdb, &idempotency.Options{Prefix: r.Prefix})
	scope := idempotency.Scope{UserID: "ann", Endpoint: "/api/v1/orders/:id/refund", Key: "k"}
	claim, _, err := s.Begin(ctx, scope, "fp")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, claim, "fp", idempotency.Response{Status: 200, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	v, err := rdb.Get(ctx, idempotency.Key(r.Prefix, "idem"+scope.Endpoint, scope.UserID, scope.Key)).Result()
	if err != nil {
		t.Fatalf("no record under the key's name: %v", err)
	}
	if fp, answer, ok := idempotency.Decode(v); !ok || fp != "fp" || answer == "" {
		t.Errorf("record %q decodes as %q %q %v, want the fingerprint fp and an answer", v, fp, answer, ok)
	}
}
