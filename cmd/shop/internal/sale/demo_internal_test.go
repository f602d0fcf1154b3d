package sale

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestEmbeddedRedisExpires: the demo's embedded Redis frees a key after its
// TTL, as Redis does, so that a lock whose release was lost is not held for
// ever. Without expireInRealTime, miniredis keeps it.
func TestEmbeddedRedisExpires(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	stop := expireInRealTime(m)
	defer stop()
	m.Set("lock", "owner")
	m.SetTTL("lock", 200*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for m.Exists("lock") {
		if time.Now().After(deadline) {
			t.Fatal("the key outlived its TTL by 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
