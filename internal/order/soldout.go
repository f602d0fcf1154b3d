package order

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// Sold-out leases (leases.go): once the strategy has refused a buyer of a
// SKU as sold out, the instance takes a lease on the SKU's row
// (stock.GrantSoldOut), which every give-back of units waits for, and
// reads the keys of the orders that hold the SKU's units. Until it ends,
// a buyer of the SKU whose key has none of them is told sold out here.

// soldOutKind is the lease on a SKU's row while it has no unit.
type soldOutKind struct{}

func (soldOutKind) of(r PlaceRequest) leaseKey { return leaseKey{sku: r.SKU} }

func (soldOutKind) refuses(err error) bool { return errors.Is(err, stock.ErrSoldOut) }

// grant takes the lease and reads the keys of the SKU's orders.
func (soldOutKind) grant(tx *gorm.DB, k leaseKey, d time.Duration) (granted, bool, error) {
	ok, err := stock.GrantSoldOut(tx, k.sku, d)
	if err != nil || !ok {
		return granted{}, false, err
	}
	// A cart's key is on its head, the order of its first line.
	winners, err := readKeys(tx, `SELECT h.user_id, h.idempotency_key FROM orders o
		JOIN orders h ON h.id = COALESCE(o.cart_id, o.id)
		WHERE o.sku = ? AND h.idempotency_key IS NOT NULL`, k.sku)
	return granted{winners: winners}, err == nil, err
}

func (soldOutKind) refusal(r PlaceRequest, _ granted) error { return SoldOut(r.SKU) }

func (soldOutKind) counters() (prometheus.Counter, prometheus.Counter) {
	return metrics.SoldOutLeases, metrics.SoldOutLeaseAnswers
}
