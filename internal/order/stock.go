package order

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/outbox"
	"github.com/stockguard/shop/internal/stock"
)

// Stock is a SKU's stock as the API shows it.
type Stock struct {
	SKU       string `json:"sku"`
	Initial   int    `json:"initial"`
	Available int    `json:"available"`
	// Sold counts the units of live orders. Read from the orders rather
	// than derived from available, it shows an oversell as sold > initial.
	Sold int `json:"sold"`
	// Pending counts the units that pending orders hold, of Sold.
	Pending int `json:"pending"`
	// Received is the sum of the SKU's movements: available + sold, when
	// every unit is explained.
	Received int `json:"received"`
}

// Stock reads sku's stock, the units sold and pending, and the sum of its
// movements.
func (s *Service) Stock(ctx context.Context, sku string) (Stock, error) {
	it, err := stock.Get(ctx, s.db, sku)
	if err != nil {
		return Stock{}, err
	}
	st := Stock{SKU: it.SKU, Initial: it.Initial, Available: it.Available}
	err = s.db.WithContext(ctx).Model(&Order{}).Where("sku = ? AND status IN ?", sku, live).
		Select("COALESCE(SUM(quantity), 0), COALESCE(SUM(CASE WHEN status = ? THEN quantity ELSE 0 END), 0)", StatusPending).
		Row().Scan(&st.Sold, &st.Pending)
	if err != nil {
		return Stock{}, fmt.Errorf("order: sold: %w", err)
	}
	if st.Received, err = stock.Received(ctx, s.db, sku); err != nil {
		return Stock{}, fmt.Errorf("order: received: %w", err)
	}
	return st, nil
}

// SetStock puts available units of sku on sale now, and returns its stock
// after the change. A new SKU is set up with that many, and its initial
// movement. An existing one keeps every order and holding, and its change
// is recorded as a set movement. The change goes through the strategy's
// guard, as a purchase does, so it is safe while buyers are served. See
// docs/api.md#stock-changes.
func (s *Service) SetStock(ctx context.Context, sku string, available int) (Stock, error) {
	for attempt := 1; ; attempt++ {
		created, err := s.create(ctx, sku, available)
		if err == nil && !created {
			err = s.change(ctx, sku, available, nil)
		}
		switch {
		case errors.Is(err, stock.ErrNotFound) && attempt < 3:
			continue // deleted between the two: set it up
		case err != nil:
			return Stock{}, fmt.Errorf("order: set stock: %w", err)
		}
		return s.Stock(ctx, sku)
	}
}

// SetStockExpected is SetStock of an existing SKU, compare-and-set: it
// changes nothing unless sku's available is expected now
// (stock.NotExpectedError, with the current value).
func (s *Service) SetStockExpected(ctx context.Context, sku string, available, expected int) (Stock, error) {
	if err := s.change(ctx, sku, available, &expected); err != nil {
		return Stock{}, fmt.Errorf("order: set stock: %w", err)
	}
	return s.Stock(ctx, sku)
}

// create sets sku up with available units, unless it exists, and reports
// whether it did.
func (s *Service) create(ctx context.Context, sku string, available int) (created bool, err error) {
	sale := s.strategy.Sale
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if created, err = stock.Create(tx, sku, available); err != nil || !created {
			return err
		}
		return sale.NewSale(tx, sku)
	})
	if err == nil && created {
		// Should this fail, the new sale's epoch still keeps what is left
		// from selling.
		err = sale.Forget(ctx, sku)
	}
	return created, err
}

// change sets an existing sku's available, keeping its orders, if it is
// expected, or expected is nil (see SetStock).
func (s *Service) change(ctx context.Context, sku string, available int, expected *int) error {
	return s.strategy.Restocker.Restock(ctx, sku, func(tx stock.Tx) (int, error) { return tx.Set(sku, available, expected) })
}

// DeleteStock deletes sku and everything that points to it: its orders
// and movements,
// their payments and published events (the relay still publishes the
// others; retention deletes them), holdings, and what the strategy keeps
// of it elsewhere; its epoch moves on, so that a SKU set up again starts a new
// sale. A cart with a line of sku goes whole: its other lines' units go
// back to their SKUs in the database (under lua, Redis has them back at
// the next reconcile). It is for demos and
// tests, and must not run while the SKU sells. See
// docs/api.md#stock-changes.
func (s *Service) DeleteStock(ctx context.Context, sku string) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The stock row first: every purchase and refund takes it before it
		// writes, so none is under way once it is locked.
		if err := stock.Delete(tx, sku); err != nil {
			return err
		}
		if err := stock.Forget(tx, sku); err != nil {
			return err
		}
		// Whole orders go: a cart with a line of sku, with its other
		// lines, whose live units go back to their SKUs and holdings.
		heads := tx.Model(&Order{}).Select("COALESCE(cart_id, id)").Where("sku = ?", sku)
		if err := giveBackOtherLines(tx, heads, sku); err != nil {
			return err
		}
		ids := tx.Model(&Order{}).Select("id").Where("id IN (?) OR cart_id IN (?)", heads, heads)
		if err := tx.Where("order_id IN (?)", ids).Delete(&payment{}).Error; err != nil {
			return err
		}
		if err := outbox.DeletePublished(tx, ids); err != nil {
			return err
		}
		var orderIDs []int64
		if err := ids.Scan(&orderIDs).Error; err != nil {
			return err
		}
		if err := tx.Where("id IN ?", append(orderIDs, 0)).Delete(&Order{}).Error; err != nil {
			return err
		}
		if err := forgetHoldings(tx, sku); err != nil {
			return err
		}
		_, err := stock.NextEpoch(tx, sku)
		return err
	})
	if err == nil {
		// Should this fail, the epoch moved on keeps the state from selling.
		err = s.strategy.Sale.Forget(ctx, sku)
	}
	if err != nil {
		return fmt.Errorf("order: delete stock: %w", err)
	}
	return nil
}

// giveBackOtherLines gives the live units of the lines other than sku's,
// of the carts that heads selects, back to their SKUs, and takes them off
// what their buyers hold.
func giveBackOtherLines(tx, heads *gorm.DB, sku string) error {
	var others []Order
	err := tx.Where("(id IN (?) OR cart_id IN (?)) AND sku <> ? AND status IN ?", heads, heads, sku, live).Find(&others).Error
	if err != nil {
		return err
	}
	for _, o := range others {
		if err := stock.Give(tx, o.SKU, o.Quantity); err != nil {
			return err
		}
		if err := unhold(tx, o.UserID, o.SKU, o.Quantity); err != nil {
			return err
		}
	}
	return nil
}

// forgetHoldings deletes what buyers hold of sku, once the limit leases
// on it have ended: a buyer who held the limit of sku is under it once
// sku is set up again.
func forgetHoldings(tx *gorm.DB, sku string) error {
	if err := limitLease.Await(tx, "sku = ?", sku); err != nil {
		return err
	}
	return tx.Where("sku = ?", sku).Delete(&purchase{}).Error
}
