package stock

import (
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// A SKU's sale epoch, in stock_epochs, numbers its sales. lua's Redis
// state of a SKU carries the epoch it was built for, and a state of
// another epoch, or none, is built again from the database before it sells
// (see docs/strategies.md). Epochs only grow: a SKU deleted and set up
// again starts a new one.
type saleEpoch struct {
	SKU   string `gorm:"column:sku;primaryKey"`
	Epoch int64
}

func (saleEpoch) TableName() string { return "stock_epochs" }

// EpochSQL is the SQL of a SKU's epoch, 0 before its first; its one
// argument is the SKU. A statement that reads the epoch with the stock
// puts it in its select list.
const EpochSQL = `(SELECT COALESCE(MAX(epoch), 0) FROM stock_epochs WHERE sku = ?)`

// Epoch reads sku's epoch.
func Epoch(tx *gorm.DB, sku string) (int64, error) {
	var e int64
	err := tx.Raw(`SELECT `+EpochSQL, sku).Row().Scan(&e)
	return e, err
}

// NextEpoch moves sku to its next epoch and returns it.
func NextEpoch(tx *gorm.DB, sku string) (int64, error) {
	err := tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "sku"}},
		DoUpdates: clause.Assignments(map[string]any{"epoch": gorm.Expr("epoch + 1")}),
	}).Create(&saleEpoch{SKU: sku, Epoch: 1}).Error
	if err != nil {
		return 0, err
	}
	return Epoch(tx, sku)
}
