package order

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// Limit leases (leases.go): once the strategy has refused a buyer of a
// SKU for the per-user limit, the instance takes a lease on the buyer's
// row of user_purchases, while it holds the limit, and reads the
// buyer's keys that have orders. Until it ends, the buyer's new keys for
// the SKU are told limit-reached here. Every change that lowers what a
// buyer holds (a refund, a cancellation, an expiry, a cart's line, a
// deleted SKU) goes through unhold, which waits for the lease first. The
// database's count is the witness under every strategy: lua's count in
// Redis never holds less than it, since Redis takes units before the
// database and gives them back after it.

// limitLease is the lease on a buyer's row of user_purchases.
var limitLease = stock.Lease{Table: "user_purchases", Column: "limit_until", What: "limit"}

// limitKind is the lease on a buyer's row while it holds limit units.
type limitKind struct{ limit int }

func (limitKind) of(r PlaceRequest) leaseKey { return leaseKey{user: r.UserID, sku: r.SKU} }

func (limitKind) refuses(err error) bool { return errors.Is(err, ErrLimitReached) }

// grant takes the lease, and reads what the buyer holds and the buyer's
// keys that have orders, of any SKU: their retries go to the strategy.
func (k limitKind) grant(tx *gorm.DB, key leaseKey, d time.Duration) (granted, bool, error) {
	ok, err := limitLease.Grant(tx, d, `user_id = ? AND sku = ? AND units >= ?`, key.user, key.sku, k.limit)
	if err != nil || !ok {
		return granted{}, false, err
	}
	var g granted
	if err := tx.Model(&purchase{}).Where("user_id = ? AND sku = ?", key.user, key.sku).Select("units").Scan(&g.held).Error; err != nil {
		return granted{}, false, err
	}
	g.winners, err = readKeys(tx, `SELECT user_id, idempotency_key FROM orders
		WHERE user_id = ? AND idempotency_key IS NOT NULL`, key.user)
	return g, err == nil, err
}

func (k limitKind) refusal(r PlaceRequest, g granted) error {
	return LimitReached(r.UserID, r.SKU, g.held, k.limit)
}

func (limitKind) counters() (prometheus.Counter, prometheus.Counter) {
	return metrics.LimitLeases, metrics.LimitLeaseAnswers
}

// unhold takes units of sku off what userID holds, in tx, once the limit
// leases on that row have ended: the buyer is under the limit only once
// no instance may still say otherwise.
func unhold(tx *gorm.DB, userID, sku string, units int) error {
	if err := limitLease.Await(tx, `user_id = ? AND sku = ?`, userID, sku); err != nil {
		return err
	}
	return tx.Model(&purchase{}).Where("user_id = ? AND sku = ?", userID, sku).Update("units", gorm.Expr("units - ?", units)).Error
}
