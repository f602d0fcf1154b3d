package db_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
)

// dialects returns a fresh, empty database of each dialect: SQLite, and
// MySQL unless -short.
func dialects(t *testing.T) map[string]string {
	t.Helper()
	dsns := map[string]string{"sqlite": db.SQLitePrefix + filepath.Join(t.TempDir(), "shop.db")}
	if !testinfra.Embedded() {
		dsns["mysql"] = testinfra.MySQL(t)
	}
	return dsns
}

func status(t *testing.T, gdb *gorm.DB) db.Status {
	t.Helper()
	st, err := db.ReadStatus(t.Context(), gdb)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The baseline migration makes, column for column and in order, the tables
// that adoption expects of a database made before versioned migrations.
func TestBaselineIsTheAdoptedSchema(t *testing.T) {
	t.Parallel()
	for name, dsn := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			gdb := testinfra.OpenDB(t, dsn)
			if err := db.MigrateFrom(t.Context(), gdb, baselineOnly(t, gdb)); err != nil {
				t.Fatal(err)
			}
			tables, err := db.ReadTables(t.Context(), gdb)
			if err != nil {
				t.Fatal(err)
			}
			delete(tables, "schema_migrations")
			delete(tables, "sqlite_sequence")
			if !maps.EqualFunc(tables, db.Baseline, func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }) {
				t.Errorf("the baseline migration made\n%v\nadoption expects\n%v", tables, db.Baseline)
			}
		})
	}
}

// Three instances, each with connections of its own, migrate an empty
// database at once: all succeed, and the baseline ran once (its CREATE
// TABLEs, run twice, would fail).
func TestMigrateThreeAtOnce(t *testing.T) {
	t.Parallel()
	for name, dsn := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			dbs := []*gorm.DB{testinfra.OpenDB(t, dsn), testinfra.OpenDB(t, dsn), testinfra.OpenDB(t, dsn)}
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, gdb := range dbs {
				wg.Go(func() {
					<-start
					if err := db.Migrate(t.Context(), gdb); err != nil {
						t.Error(err)
					}
				})
			}
			close(start)
			wg.Wait()
			if st := status(t, dbs[0]); st.Version != st.Latest() || st.Dirty || st.Legacy {
				t.Errorf("after three migrated at once: %+v", st)
			}
		})
	}
}

// Each refusal names the way out: behind names the missing version, ahead
// says a newer release migrated it, dirty gives the command that fixes it.
func TestSchemaRefusals(t *testing.T) {
	t.Parallel()
	for name, dsn := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			ctx, gdb := t.Context(), testinfra.OpenDB(t, dsn)
			err := db.PrepareSchema(ctx, gdb, false)
			if !errors.Is(err, db.ErrSchemaBehind) || !strings.Contains(err.Error(), "lacks versions 1, ") {
				t.Errorf("an empty schema, not migrating: %v; want %v naming every version", err, db.ErrSchemaBehind)
			}
			if tables, _ := db.ReadTables(ctx, gdb); len(tables) > 0 {
				t.Errorf("the check made tables: %v", tables)
			}
			if err := db.PrepareSchema(ctx, gdb, true); err != nil {
				t.Fatal(err)
			}
			if err := db.PrepareSchema(ctx, gdb, false); err != nil {
				t.Errorf("a schema at the latest version, not migrating: %v", err)
			}

			// As a newer release leaves it: force refuses a version this
			// release does not have.
			if err := db.MigrateForce(ctx, gdb, 99); err == nil {
				t.Error("force 99: no error")
			}
			if err := gdb.Exec("UPDATE schema_migrations SET version = 99").Error; err != nil {
				t.Fatal(err)
			}
			for _, migrate := range []bool{true, false} {
				err := db.PrepareSchema(ctx, gdb, migrate)
				if !errors.Is(err, db.ErrSchemaAhead) || !strings.Contains(err.Error(), "version 99") {
					t.Errorf("a schema at 99, migrate %t: %v; want %v", migrate, err, db.ErrSchemaAhead)
				}
			}

			latest := status(t, gdb).Latest()
			if err := gdb.Exec("UPDATE schema_migrations SET version = ?, dirty = ?", latest, true).Error; err != nil {
				t.Fatal(err)
			}
			force := fmt.Sprintf("`shop migrate force %d`", latest)
			for _, migrate := range []bool{true, false} {
				err := db.PrepareSchema(ctx, gdb, migrate)
				if !errors.Is(err, db.ErrSchemaDirty) || !strings.Contains(err.Error(), force) {
					t.Errorf("a dirty schema, migrate %t: %v; want %v with %s", migrate, err, db.ErrSchemaDirty, force)
				}
			}
			if err := db.MigrateForce(ctx, gdb, latest); err != nil {
				t.Fatal(err)
			}
			if err := db.PrepareSchema(ctx, gdb, false); err != nil {
				t.Errorf("after %s: %v", force, err)
			}
		})
	}
}

// Down, by every version, rolls the schema back to an empty database, and
// up makes it again.
func TestMigrateDownAndUp(t *testing.T) {
	t.Parallel()
	for name, dsn := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			ctx, gdb := t.Context(), testinfra.OpenDB(t, dsn)
			if err := db.Migrate(ctx, gdb); err != nil {
				t.Fatal(err)
			}
			n := len(status(t, gdb).Versions)
			if err := db.MigrateDown(ctx, gdb, n); err != nil {
				t.Fatal(err)
			}
			if st := status(t, gdb); st.Version != -1 || st.Legacy {
				t.Errorf("after down %d: %+v, want no version and no tables", n, st)
			}
			if err := db.Migrate(ctx, gdb); err != nil {
				t.Fatal(err)
			}
			if st := status(t, gdb); st.Version != st.Latest() {
				t.Errorf("after up: %+v, want the latest version", st)
			}
		})
	}
}

// A database without a version whose tables are not the baseline's is
// refused, named, and left as it was.
func TestAdoptRefusesAnotherSchema(t *testing.T) {
	t.Parallel()
	for name, dsn := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			ctx, gdb := t.Context(), testinfra.OpenDB(t, dsn)
			if err := gdb.Exec(`CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, sku VARCHAR(64) NOT NULL)`).Error; err != nil {
				t.Fatal(err)
			}
			if st := status(t, gdb); !st.Legacy {
				t.Errorf("status of a database with an orders table and no version: %+v, want Legacy", st)
			}
			err := db.Migrate(ctx, gdb)
			if !errors.Is(err, db.ErrSchemaUnknown) || !strings.Contains(err.Error(), "no column orders.user_id") || !strings.Contains(err.Error(), "no table stock_items") {
				t.Errorf("adopting a partial schema: %v; want %v naming what differs", err, db.ErrSchemaUnknown)
			}
			if st := status(t, gdb); st.Version != -1 {
				t.Errorf("after the refusal: version %d, want none", st.Version)
			}
		})
	}
}

// Versions may have gaps (another change owns the numbers between): what
// is missing, ahead or unknown is read against the versions there are.
func TestStatusWithGaps(t *testing.T) {
	t.Parallel()
	versions := []int{1, 2, 10, 20}
	cases := []struct {
		version int
		want    error
		says    string
	}{
		{-1, db.ErrSchemaBehind, "lacks versions 1, 2, 10, 20"},
		{2, db.ErrSchemaBehind, "at version 2 and lacks versions 10, 20"},
		{10, db.ErrSchemaBehind, "lacks version 20"},
		{20, nil, ""},
		{5, db.ErrSchemaUnknown, "version 5, which this release does not have"},
		{21, db.ErrSchemaAhead, "knows migrations up to 20"},
	}
	for _, c := range cases {
		err := db.Status{Version: c.version, Versions: versions}.Check()
		if !errors.Is(err, c.want) || (err != nil && !strings.Contains(err.Error(), c.says)) {
			t.Errorf("at %d: %v; want %v saying %q", c.version, err, c.want, c.says)
		}
	}
	err := db.Status{Version: 10, Dirty: true, Versions: versions}.Check()
	if !errors.Is(err, db.ErrSchemaDirty) || !strings.Contains(err.Error(), "`shop migrate force 10`") || !strings.Contains(err.Error(), "`shop migrate force 2`") {
		t.Errorf("dirty at 10: %v; want the force commands for 10 and 2", err)
	}
}

// A migration that fails partway leaves the schema dirty at its version,
// and the next Migrate refuses it with the command that fixes it. On
// SQLite the migration ran in a savepoint, and none of it is left; on
// MySQL its statements before the failing one stay.
func TestFailedMigrationIsDirty(t *testing.T) {
	t.Parallel()
	for name, dsn := range dialects(t) {
		t.Run(name, func(t *testing.T) {
			ctx, gdb := t.Context(), testinfra.OpenDB(t, dsn)
			src := baselineOnly(t, gdb)
			src["000002_broken.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE half (id INTEGER);\nCREATE TABLE half (id INTEGER);")}
			src["000002_broken.down.sql"] = &fstest.MapFile{Data: []byte("DROP TABLE half;")}
			if err := db.MigrateFrom(ctx, gdb, src); err == nil {
				t.Fatal("a failing migration: no error")
			}
			st := status(t, gdb)
			if st.Version != 2 || !st.Dirty {
				t.Errorf("after the failure: version %d, dirty %t; want 2, dirty", st.Version, st.Dirty)
			}
			tables, err := db.ReadTables(ctx, gdb)
			if err != nil {
				t.Fatal(err)
			}
			if _, left := tables["half"]; left != (name == "mysql") {
				t.Errorf("%s: the failed migration's first table is left: %t", name, left)
			}
			err = db.MigrateFrom(ctx, gdb, src)
			if !errors.Is(err, db.ErrSchemaDirty) || !strings.Contains(err.Error(), "`shop migrate force 2`") || !strings.Contains(err.Error(), "`shop migrate force 1`") {
				t.Errorf("migrating a dirty schema: %v; want %v with the force commands", err, db.ErrSchemaDirty)
			}
		})
	}
}

// baselineOnly is the shop's migrations of gdb's dialect cut to version 1,
// the schema that a database made before versioned migrations has.
func baselineOnly(t *testing.T, gdb *gorm.DB) fstest.MapFS {
	t.Helper()
	src := fstest.MapFS{}
	for _, f := range []string{"000001_baseline.up.sql", "000001_baseline.down.sql"} {
		b, err := fs.ReadFile(db.Sources(gdb), f)
		if err != nil {
			t.Fatal(err)
		}
		src[f] = &fstest.MapFile{Data: b}
	}
	return src
}
