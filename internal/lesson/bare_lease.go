package lesson

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// BareLease is a correct Redis lock in every way but two: nothing renews
// its lease while the holder works (no watchdog), and it hands out no
// fencing token for the holder's writes. A holder paused past the TTL (a
// GC pause, swap, SIGSTOP) wakes up still believing it holds the lock, and
// writes what it computed before the pause over the work of the holder
// that came after it: a lost update, here an oversell.
//
// A watchdog alone does not fix it, since a paused process cannot renew.
// The fix is the fencing token: lock.Redis hands one out with every lease,
// and stock.Fenced refuses a write whose token is older than the last.
type BareLease struct{ owned }

var _ Lock = (*BareLease)(nil)

// NewBareLease returns the mistake on key.
func NewBareLease(client *redis.Client, key string, ttl time.Duration) *BareLease {
	return &BareLease{newOwned(client, key, ttl)}
}

// Unlock implements Lock, checking the owner: that part is right.
func (l *BareLease) Unlock(ctx context.Context) error { return compareAndDelete(ctx, l.owned) }

// WriteUnfenced is the write of a holder that trusts its lease: it sets the
// stock it computed from its earlier read and inserts buyer's order, in one
// transaction, with nothing that could tell a stale holder from the current
// one. Its SQL on stock_items is the mistake the lesson shows.
func WriteUnfenced(ctx context.Context, gdb *gorm.DB, sku string, available int, buyer string) error {
	return gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`UPDATE stock_items SET available = ? WHERE sku = ?`, available, sku).Error; err != nil {
			return err
		}
		return insertOrder(tx, sku, buyer)
	})
}
