package lua

import "github.com/stockguard/shop/internal/lua/redisstock"

// Buckets (LuaOptions.Buckets): each SKU's Redis stock split into buckets,
// each under a hash tag of its own (redisstock.BucketOf), so that one hot SKU's
// scripts run on every master of a Redis Cluster. The database keeps one
// row per SKU, and a bucket is, to Redis, a SKU of its own: a state, a
// log, keys. A buyer tries its home bucket, then the others (Lua.route);
// the rebuild deals the database's stock out over the buckets (shares).
// See docs/strategies.md#buckets.

// gather is the fewest units a bucket is dealt while the stock lasts:
// below it, the units left gather into fewer buckets, so that the last
// units of a sale are not one per bucket, each found only by the buyers
// who happen to try it.
const gather = 16

// bucketNames names sku's buckets, bucket 0 first: the SKU itself.
func (l *Lua) bucketNames(sku string) []string {
	names := make([]string, l.buckets)
	for b := range names {
		names[b] = redisstock.BucketOf(sku, b)
	}
	return names
}

// shares deals available, the database's stock, over the buckets whose
// logs hold pending units each: every bucket's share covers its own
// pending reservations (a share is a bucket's available plus its pending,
// as load.lua takes it), as far as the stock goes, and what is left goes
// out evenly, but at least gather units to a bucket, to the lowest
// buckets first. The shares add up to available, so that the buckets
// together hold the database's stock less what is pending, below zero
// when the pending pass it (Redis granted what the database will refuse):
// a bucket whose pending the stock does not cover is left below zero by
// as much. Its buyers then hear sold out rather than wait on units that
// cannot come (doubt.lua), and the refused reservations give back, as
// they leave the log, only what they took past the stock. Left at zero,
// the buckets would hold every buyer short of units in doubt until the
// refusals, and then have the refused units back, which the database
// does not have, for the next buyers to reserve and be refused in turn.
func shares(available int, pending []int) []int {
	s := make([]int, len(pending))
	left := available
	for i, p := range pending {
		s[i] = min(p, left)
		left -= s[i]
	}
	if left <= 0 {
		return s
	}
	per := max(gather, (left+len(s)-1)/len(s))
	for i := 0; left > 0 && i < len(s); i++ {
		n := min(per, left)
		s[i] += n
		left -= n
	}
	return s
}
