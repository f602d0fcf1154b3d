package sale

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/loadtest"
)

// withCarts gives the shops of cfg the plan's payment window and, with
// one, a payment secret of their own unless cfg names one: the load signs
// its payments with it, as the payment provider would.
func withCarts(cfg config.Config, p loadtest.Plan) config.Config {
	cfg.PaymentWindow = p.PaymentWindow
	if p.PaymentWindow > 0 && cfg.PaymentSecret == "" {
		secret := make([]byte, 32)
		rand.Read(secret) // never fails
		cfg.PaymentSecret = hex.EncodeToString(secret)
	}
	return cfg
}

// burst returns the burst's load: with a payment window, an abandoned-cart
// sale whose timeline is read from the database.
func (r runner) burst() loadFunc {
	if r.plan.PaymentWindow <= 0 {
		return r.plan.Burst.Run
	}
	c := r.plan.Carts()
	c.Sample = cartSampler(r.db, r.plan.Stock)
	return c.Run
}

// cartSampler reads what the units of a sale of stock units are at. Only
// the expiry job cancels orders in an abandoned-cart sale, so the units of
// its cancelled orders are those that expired.
func cartSampler(gdb *gorm.DB, stock int) func(context.Context, string) (loadtest.CartPoint, error) {
	return func(ctx context.Context, sku string) (loadtest.CartPoint, error) {
		units, err := audit.Units(gdb.WithContext(ctx), sku)
		ordered := 0
		for _, n := range units {
			ordered += n
		}
		return loadtest.CartPoint{Held: units["pending"], Paid: units["paid"], Expired: units["cancelled"], Resold: max(0, ordered-stock)}, err
	}
}

// cartProblems says what an abandoned-cart sale left undone: units not
// paid once it ended. Every unit held past its window must have come back
// and sold again to a buyer who paid.
func cartProblems(stats loadtest.Stats, a audit.Audit) []string {
	if stats.Carts == nil {
		return nil
	}
	if paid := a.Sold - a.Pending; paid < a.Initial {
		return []string{fmt.Sprintf("only %d of %d units paid when the sale ended (%d held, %d available, %.1fs)",
			paid, a.Initial, a.Pending, a.Available, stats.Seconds)}
	}
	return nil
}
