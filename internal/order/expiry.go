package order

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/stock"
)

// expiryBatch bounds the due orders one round of Expire reads.
const expiryBatch = 100

// Expire cancels the pending orders whose deadline has passed by the
// database's clock, oldest deadline first, each through the strategy in a
// transaction of its own, as its buyer's cancellation would. It is the job
// that runs on one instance at a time: token is the run's fencing token (0
// for none), and a run that a later run overtook writes nothing
// (stock.ErrFenced). It returns how many orders it cancelled.
func (s *Service) Expire(ctx context.Context, token int64) (int, error) {
	fence := &jobFence{Name: "expiry", Token: token}
	n := 0
	defer func() { s.countPending(ctx) }()
	for {
		now, err := db.Now(s.db.WithContext(ctx))
		if err != nil {
			return n, fmt.Errorf("order: expire: %w", err)
		}
		var due []Order
		err = s.db.WithContext(ctx).Where("status = ? AND expires_at <= ? AND cart_id IS NULL", StatusPending, now).
			Order("expires_at").Limit(expiryBatch).Find(&due).Error
		if err != nil {
			return n, fmt.Errorf("order: expire: %w", err)
		}
		for _, o := range due {
			_, err := s.giveBack(ctx, o, transition{from: []string{StatusPending}, to: StatusCancelled, event: EventExpired, due: true, fence: fence})
			switch {
			case err == nil:
				n++
			case !errors.Is(err, errMoved): // paid or cancelled meanwhile
				return n, fmt.Errorf("order: expire %d: %w", o.ID, err)
			}
		}
		if len(due) < expiryBatch {
			return n, nil
		}
	}
}

// countPending sets the gauge of the units that pending orders hold.
func (s *Service) countPending(ctx context.Context) {
	var units int64
	if s.db.WithContext(ctx).Model(&Order{}).Where("status = ?", StatusPending).
		Select("COALESCE(SUM(quantity), 0)").Scan(&units).Error == nil {
		metrics.UnitsPending.Set(float64(units))
	}
}

// jobFence is the fence of a job in job_fences: the highest token of the
// job's runs that have written.
type jobFence struct {
	Name  string `gorm:"primaryKey"`
	Token int64
}

func (jobFence) TableName() string { return "job_fences" }

// claim, in a transaction of a run whose token is f's, raises the job's
// fence to it, or fails with stock.ErrFenced if a later run has raised it
// past. The fence row stays locked until the transaction ends, so a run
// overtaken mid-transaction cannot commit after the run that overtook it.
func (f *jobFence) claim(tx *gorm.DB) error {
	if f.Token == 0 {
		return nil
	}
	var now jobFence
	err := tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Where("name = ?", f.Name).Take(&now).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return tx.Create(&jobFence{Name: f.Name, Token: f.Token}).Error
	case err != nil:
		return err
	case now.Token > f.Token:
		return fmt.Errorf("%w: job %s: token %d, fence %d", stock.ErrFenced, f.Name, f.Token, now.Token)
	case now.Token < f.Token:
		return tx.Model(&jobFence{}).Where("name = ?", f.Name).Update("token", f.Token).Error
	}
	return nil
}
