package stock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
)

// The ledger of stock: a row of stock_movements for every change of a
// SKU's stock that is not an order's. Orders are the ledger of sales, so
// that the sum of a SKU's movements is its available stock plus the units
// of its live orders, whatever restocks came between (internal/audit).
// The initial column of stock_items moves with every movement, and so
// stays their sum. See docs/api.md#stock-movements.

// Errors of a change of stock that is not an order's.
var (
	// ErrInsufficient means an adjustment would take available below 0.
	ErrInsufficient = errors.New("stock: not enough available for the adjustment")
	// ErrNotExpected means a change expected another available than the
	// current one (NotExpectedError).
	ErrNotExpected = errors.New("stock: expected_available is not the current value")
)

// NotExpectedError is ErrNotExpected with the current value.
type NotExpectedError struct {
	SKU       string
	Available int
}

func (e *NotExpectedError) Error() string {
	return fmt.Sprintf("%v: %s has %d available", ErrNotExpected, e.SKU, e.Available)
}

func (e *NotExpectedError) Unwrap() error { return ErrNotExpected }

// Reason says why a movement was made.
type Reason string

// The reasons: the shop writes initial (a new SKU) and set (a PUT of its
// available); an operator's adjustment gives one of the others.
const (
	ReasonInitial    Reason = "initial"
	ReasonSet        Reason = "set"
	ReasonRestock    Reason = "restock"
	ReasonCorrection Reason = "correction"
	ReasonDamaged    Reason = "damaged"
	ReasonReturned   Reason = "returned"
)

// AdjustmentReasons are the reasons an adjustment may give.
var AdjustmentReasons = []Reason{ReasonRestock, ReasonCorrection, ReasonDamaged, ReasonReturned}

// Adjustable reports whether an adjustment may give r.
func (r Reason) Adjustable() bool { return slices.Contains(AdjustmentReasons, r) }

// Who makes a movement.
const (
	ActorAdmin  = "admin"
	ActorSystem = "system"
)

// MaxReference is the longest reference, in characters.
const MaxReference = 128

// initialKey is the Idempotency-Key of a SKU's initial movement: no
// client can send an empty key, and the unique (sku, idempotency_key)
// index keeps a SKU to one initial movement.
const initialKey = ""

// Movement is one row of stock_movements.
type Movement struct {
	ID        int64     `json:"id"`
	SKU       string    `json:"sku" gorm:"column:sku"`
	Delta     int       `json:"delta"`
	Reason    Reason    `json:"reason"`
	Reference string    `json:"reference"`
	Actor     string    `json:"actor"`
	Key       *string   `json:"-" gorm:"column:idempotency_key"`
	CreatedAt time.Time `json:"created_at"`
}

// TableName tells GORM the table.
func (Movement) TableName() string { return "stock_movements" }

// Same reports whether m asks what n asks: the same SKU, delta, reason and
// reference. A key's replay must.
func (m Movement) Same(n Movement) bool {
	return m.SKU == n.SKU && m.Delta == n.Delta && m.Reason == n.Reason && m.Reference == n.Reference
}

// Record writes m, a change already made to its SKU's available stock in
// tx, and moves the SKU's initial by its delta. created_at is the
// database's clock. A key the SKU has a movement for already is a
// duplicate (db.IsDuplicate), and tx must then roll back.
func Record(tx *gorm.DB, m Movement) error {
	err := tx.Exec(`INSERT INTO stock_movements (sku, delta, reason, reference, actor, idempotency_key, created_at)
		VALUES (?, ?, ?, ?, ?, ?, `+db.NowSQL(tx)+`)`, m.SKU, m.Delta, m.Reason, m.Reference, m.Actor, m.Key).Error
	if err != nil || m.Reason == ReasonInitial {
		return err
	}
	return tx.Exec(`UPDATE stock_items SET initial = initial + ? WHERE sku = ?`, m.Delta, m.SKU).Error
}

// recordInitial writes sku's initial movement of quantity units.
func recordInitial(tx *gorm.DB, sku string, quantity int) error {
	key := initialKey
	return Record(tx, Movement{SKU: sku, Delta: quantity, Reason: ReasonInitial, Actor: ActorSystem, Key: &key})
}

// Received is the sum of sku's movements.
func Received(ctx context.Context, tx *gorm.DB, sku string) (int, error) {
	var n int
	err := tx.WithContext(ctx).Raw(`SELECT COALESCE(SUM(delta), 0) FROM stock_movements WHERE sku = ?`, sku).Row().Scan(&n)
	return n, err
}

// Movements returns up to limit of sku's movements with an id above
// after, oldest first.
func Movements(ctx context.Context, tx *gorm.DB, sku string, after int64, limit int) ([]Movement, error) {
	var ms []Movement
	err := tx.WithContext(ctx).Where("sku = ? AND id > ?", sku, after).Order("id").Limit(limit).Find(&ms).Error
	return ms, err
}

// Keyed returns sku's movement made with key, if there is one.
func Keyed(ctx context.Context, tx *gorm.DB, sku, key string) (m Movement, found bool, err error) {
	err = tx.WithContext(ctx).Where("sku = ? AND idempotency_key = ?", sku, key).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Movement{}, false, nil
	}
	return m, err == nil, err
}

// Forget deletes sku's movements, for a SKU that is deleted or starts a
// new sale.
func Forget(tx *gorm.DB, sku string) error {
	return tx.Exec(`DELETE FROM stock_movements WHERE sku = ?`, sku).Error
}
