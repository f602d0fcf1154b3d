package redisstock

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/stockguard/shop/internal/idempotency"
)

// The keys of lua's Redis stock: each SKU's, under a hash tag of its own.

// The indexes of a SKU's keys.
const (
	kState = iota
	kHoldings
	kLog
	kFence
	kKeys // each logged reservation's entry, by user and Idempotency-Key
)

// keys returns a SKU's keys, by the indexes above.
func (s *Stock) keys(sku string) []string {
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
func (s *Stock) tagged(name string) string {
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

// BucketOf names bucket b of sku's stock in Redis, as Stock takes a
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

// answerKey is where a buyer's final answer is kept, as every key is
// (idempotency.Key): under the SKU's hash tag, so that the scripts that
// reserve and settle keep it in the same step.
func (s *Stock) answerKey(sku, user, key string) string {
	return idempotency.Key(s.tagged(sku), "answer", user, key)
}

// record is answer as r's key keeps it (idempotency.Record), "" for none:
// under a key of the SKU's, the quantity is the request's fingerprint.
func (r Reservation) record(answer string) string {
	if answer == "" {
		return ""
	}
	return idempotency.Record(strconv.Itoa(r.Quantity), answer)
}

// field names r's key in the SKU's keys (kKeys).
func (r Reservation) field() string { return idempotency.Field(r.UserID, r.Key) }

// skus is the set of SKUs that have a log, for Claim.
func (s *Stock) skus() string { return s.prefix + "lua:skus" }
