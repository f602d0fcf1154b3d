package idempotency

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/testinfra"
)

// TestBeginResent: go-redis sends a script again when the connection
// broke before the reply, and the claim may then be made already. A claim
// sent twice is made, not "in progress"; another request's is refused.
// (A real server cannot be made to break a reply on demand, so the test
// sends the same script twice.)
func TestBeginResent(t *testing.T) {
	t.Parallel()
	r := testinfra.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	key, mine, other := r.Prefix+"k", Record("f", pending+"1"), Record("f", pending+"2")
	for i := range 2 {
		if err := beginScript.Run(t.Context(), rdb, []string{key}, mine, 60000).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("claim, sent %d times: %v, want the claim made", i+1, err)
		}
	}
	if v, err := beginScript.Run(t.Context(), rdb, []string{key}, other, 60000).Text(); err != nil || v != mine {
		t.Errorf("another request's claim: %q %v, want the first's record", v, err)
	}
}
