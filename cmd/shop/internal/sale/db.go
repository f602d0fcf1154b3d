package sale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
)

// openDB opens the shop's database, for the audit, migrates it if asked,
// and names its server and version.
func openDB(ctx context.Context, dsn string, migrate bool) (gdb *gorm.DB, what string, err error) {
	if gdb, err = db.Open(ctx, dsn); err != nil {
		return nil, "", err
	}
	var version string
	if db.IsSQLite(gdb) {
		err = gdb.WithContext(ctx).Raw(`SELECT sqlite_version()`).Row().Scan(&version)
		what = "SQLite " + version + " (embedded, pure Go, WAL, file in a temporary directory)"
	} else {
		err = gdb.WithContext(ctx).Raw(`SELECT VERSION()`).Row().Scan(&version)
		what = "MySQL " + version
	}
	if err == nil && migrate {
		err = db.Migrate(ctx, gdb)
	}
	if err != nil {
		return nil, "", errors.Join(err, db.Close(gdb))
	}
	return gdb, what, nil
}

// forget deletes sku's orders, with their payments and published events,
// and its stock and movements, so that the next load starts from the same
// table sizes. The events the relay has yet to publish stay: it would
// wait for them as missing (docs/orders.md#order-events). Each run's
// stream starts where the last one's relay got, so the largest cursor is
// this run's.
func forget(ctx context.Context, gdb *gorm.DB, sku string) error {
	gdb = gdb.WithContext(ctx)
	for table, published := range map[string]string{"payments": "", "order_events": " AND id <= (SELECT COALESCE(MAX(last_id), 0) FROM event_cursors)"} {
		if err := gdb.Exec(`DELETE FROM `+table+` WHERE order_id IN (SELECT id FROM orders WHERE sku = ?)`+published, sku).Error; err != nil {
			return fmt.Errorf("sale: clean up the %s of %s: %w", table, sku, err)
		}
	}
	if err := gdb.Exec(`DELETE FROM orders WHERE sku = ?`, sku).Error; err != nil {
		return fmt.Errorf("sale: clean up %s: %w", sku, err)
	}
	for _, table := range []string{"stock_movements", "stock_items"} {
		if err := gdb.Exec(`DELETE FROM `+table+` WHERE sku = ?`, sku).Error; err != nil {
			return fmt.Errorf("sale: clean up %s: %w", sku, err)
		}
	}
	return nil
}

// settle waits, up to a minute, until no other statement runs in the
// database. A request that timed out leaves its statement behind in the
// server, still queued on the hot row for up to innodb_lock_wait_timeout;
// the next load must not pay for it.
func settle(ctx context.Context, gdb *gorm.DB) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		var running int
		err := gdb.WithContext(ctx).Raw(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE COMMAND NOT IN ('Sleep', 'Daemon') AND ID <> CONNECTION_ID()`).Row().Scan(&running)
		if err != nil || running == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil // waited long enough: measure anyway
}
