package db

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/golang-migrate/migrate/v4/database"
	"gorm.io/gorm"
)

// baselineVersion is the migration that creates the schema as the shop
// made it before versioned migrations.
const baselineVersion = 1

// baseline is the tables and columns of that schema, the same in both
// dialects: a database that has them all and no version is adopted at
// baselineVersion. A test checks them against the baseline migration.
var baseline = map[string][]string{
	"stock_items":    {"sku", "initial", "available", "version", "fence", "updated_at"},
	"orders":         {"id", "sku", "user_id", "quantity", "status", "idempotency_key", "created_at", "refunded_at", "refund_key", "expires_at", "paid_at", "payment_id", "cancelled_at", "cancel_key", "cart_id", "line_count"},
	"payments":       {"payment_id", "order_id", "status", "reason", "created_at"},
	"order_events":   {"id", "order_id", "type", "payload", "created_at", "published_at"},
	"job_fences":     {"name", "token"},
	"user_purchases": {"user_id", "sku", "units"},
	"stock_epochs":   {"sku", "epoch"},
	"locks":          {"token", "name", "owner", "expires_at"},
}

// settle reads the version under the migration lock, where no other
// instance is halfway through a migration, into st. It refuses a dirty
// schema and one this release does not know, and adopts a database made
// before versioned migrations: once its tables are checked to be the
// baseline's, it records baselineVersion.
func settle(ctx context.Context, gdb *gorm.DB, drv database.Driver, st *Status) (err error) {
	if err := drv.Lock(); err != nil {
		return err
	}
	defer func() {
		if uerr := drv.Unlock(); err == nil {
			err = uerr
		}
	}()
	if st.Version, st.Dirty, err = drv.Version(); err != nil {
		return err
	}
	if err := st.refuse(); err != nil || st.Version != database.NilVersion {
		return err
	}
	tables, err := readTables(ctx, gdb)
	if err != nil || !hasShopTables(tables) {
		return err
	}
	if diff := baselineDiff(tables); diff != "" {
		return fmt.Errorf("%w: it has no version and its tables differ from the schema this release adopts (%s); "+
			"a database made by an earlier release is brought to that schema by running that release's `shop serve` once",
			ErrSchemaUnknown, diff)
	}
	return drv.SetVersion(baselineVersion, false)
}

// hasShopTables reports whether any of the baseline's tables exists.
func hasShopTables(tables map[string][]string) bool {
	for t := range baseline {
		if _, ok := tables[t]; ok {
			return true
		}
	}
	return false
}

// baselineDiff says how tables differ from the baseline's: "" if not at all.
func baselineDiff(tables map[string][]string) string {
	var diffs []string
	for _, t := range slices.Sorted(maps.Keys(baseline)) {
		have, ok := tables[t]
		if !ok {
			diffs = append(diffs, "no table "+t)
			continue
		}
		for _, c := range baseline[t] {
			if !slices.Contains(have, c) {
				diffs = append(diffs, "no column "+t+"."+c)
			}
		}
		for _, c := range have {
			if !slices.Contains(baseline[t], c) {
				diffs = append(diffs, "an unknown column "+t+"."+c)
			}
		}
	}
	return strings.Join(diffs, ", ")
}

// readTables reads the database's tables and their columns.
func readTables(ctx context.Context, gdb *gorm.DB) (map[string][]string, error) {
	q := `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = DATABASE() ORDER BY table_name, ordinal_position`
	if IsSQLite(gdb) {
		q = `SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, c.cid`
	}
	rows, err := gdb.WithContext(ctx).Raw(q).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	tables := map[string][]string{}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			return nil, err
		}
		tables[t] = append(tables[t], c)
	}
	return tables, rows.Err()
}
