package stock

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// The stock row's statements that the strategies share. Every change of
// available bumps the row's version and updated_at, whoever makes it.

// change adds delta to sku's available unless that takes it below 0, and
// reports whether it did: the conditional UPDATE that refuses rather than
// oversells.
func change(tx *gorm.DB, sku string, delta int) (bool, error) {
	res := tx.Exec(`UPDATE stock_items SET available = available + ?, version = version + 1, updated_at = ?
		WHERE sku = ? AND available + ? >= 0`, delta, now(), sku, delta)
	if res.Error != nil || res.RowsAffected != 1 {
		return false, res.Error
	}
	return true, awaitLeases(tx, []Line{{SKU: sku, Delta: delta}})
}

// Take takes n units of sku, in tx, if it has them, and reports whether
// it did.
func Take(tx *gorm.DB, sku string, n int) (bool, error) { return change(tx, sku, -n) }

// Give gives n units of sku back, in tx.
func Give(tx *gorm.DB, sku string, n int) error {
	_, err := change(tx, sku, n)
	return err
}

// Lock locks sku's row until tx ends, by a write of its version alone, and
// reports whether it exists. A read after it sees every commit before it,
// and nothing changes the row until tx ends.
func Lock(tx *gorm.DB, sku string) (bool, error) {
	res := tx.Exec(`UPDATE stock_items SET version = version + 1, updated_at = ? WHERE sku = ?`, now(), sku)
	return res.RowsAffected == 1, res.Error
}

// ReadEpoch reads sku's available and its sale's epoch, in one statement.
func ReadEpoch(tx *gorm.DB, sku string) (available int, epoch int64, err error) {
	err = tx.Raw(`SELECT available, `+EpochSQL+` FROM stock_items WHERE sku = ?`, sku, sku).Row().Scan(&available, &epoch)
	return available, epoch, err
}

// OnSale returns the SKUs that have a stock row and a sale's epoch, in
// order.
func OnSale(ctx context.Context, gdb *gorm.DB) ([]string, error) {
	var skus []string
	err := gdb.WithContext(ctx).Raw(`SELECT e.sku FROM stock_epochs e JOIN stock_items s ON s.sku = e.sku ORDER BY e.sku`).Scan(&skus).Error
	return skus, err
}

// AvailableOf is the query of sku's available, as a subquery for a caller
// that reads it with rows of its own in one statement.
func AvailableOf(gdb *gorm.DB, sku string) *gorm.DB {
	return gdb.Model(&Item{}).Select("available").Where("sku = ?", sku)
}

// Delete deletes sku's row, in tx, or fails with ErrNotFound.
func Delete(tx *gorm.DB, sku string) error {
	// Once deleted, sku may be set up again: its leases end first.
	if err := awaitLeases(tx, []Line{{SKU: sku, Delta: 1}}); err != nil {
		return err
	}
	res := tx.Where("sku = ?", sku).Delete(&Item{})
	if res.Error == nil && res.RowsAffected == 0 {
		return fmt.Errorf("%w: %s", ErrNotFound, sku)
	}
	return res.Error
}
