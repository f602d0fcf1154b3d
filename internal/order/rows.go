package order

import (
	"context"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The reads and writes of orders and user_purchases that the strategies
// placing their own orders (internal/groupcommit, internal/lua) make in
// their own transactions: this package keeps those tables' SQL.

// Known returns the orders that the given users' Idempotency-Keys have,
// by key, a cart's with its lines. By user alone: the index's prefix, one range per user, where
// users and keys together would ask for every pair.
func Known(ctx context.Context, gdb *gorm.DB, users []string) (map[UserKey]Order, error) {
	var existing []Order
	if err := gdb.WithContext(ctx).Raw(`SELECT * FROM orders WHERE user_id IN ?`, users).Scan(&existing).Error; err != nil {
		return nil, err
	}
	if err := withItems(ctx, gdb, existing); err != nil {
		return nil, err
	}
	known := make(map[UserKey]Order, len(existing))
	for _, o := range existing {
		if o.IdempotencyKey != nil {
			known[UserKey{o.UserID, *o.IdempotencyKey}] = o
		}
	}
	return known, nil
}

// Held reads, in tx, the units of sku that each of users holds; every
// user's, when users is nil.
func Held(tx *gorm.DB, sku string, users []string) (map[string]int, error) {
	q := tx.Model(&purchase{}).Where("sku = ?", sku)
	if users != nil {
		q = q.Where("user_id IN ?", users)
	}
	var rows []purchase
	if err := q.Scan(&rows).Error; err != nil {
		return nil, err
	}
	held := make(map[string]int, len(rows))
	for _, p := range rows {
		held[p.UserID] = p.Units
	}
	return held, nil
}

// SetHeld sets, in tx, what each user in held holds of sku.
func SetHeld(tx *gorm.DB, sku string, held map[string]int) error {
	if len(held) == 0 {
		return nil
	}
	rows := make([]purchase, 0, len(held))
	for user, units := range held {
		rows = append(rows, purchase{UserID: user, SKU: sku, Units: units})
	}
	return tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "user_id"}, {Name: "sku"}},
		DoUpdates: clause.AssignmentColumns([]string{"units"}),
	}).Create(&rows).Error
}

// KeysOf returns, of the orders of sku that users placed, their orders'
// heads, by key: a cart's line is its own row of sku, but only the cart's
// head row carries the Idempotency-Key.
func KeysOf(tx *gorm.DB, sku string, users []string) (map[UserKey]Order, error) {
	var rows []Order
	err := tx.Raw(`SELECT h.id, h.user_id, h.idempotency_key, h.created_at, h.expires_at FROM orders o JOIN orders h ON h.id = COALESCE(o.cart_id, o.id)
		WHERE o.sku = ? AND o.user_id IN ?`, sku, users).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	have := make(map[UserKey]Order, len(rows))
	for _, o := range rows {
		if o.IdempotencyKey != nil {
			have[UserKey{o.UserID, *o.IdempotencyKey}] = o
		}
	}
	return have, nil
}

// Sold reports, in tx, whether sku has any order.
func Sold(tx *gorm.DB, sku string) (bool, error) {
	var sold bool
	err := tx.Raw(`SELECT EXISTS (SELECT 1 FROM orders WHERE sku = ?)`, sku).Row().Scan(&sold)
	return sold, err
}
