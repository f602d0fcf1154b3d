package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"gorm.io/gorm"
)

// Status is where a database's schema stands against this release's
// migrations, read without changing anything.
type Status struct {
	Version  int   // the version recorded; -1 for none
	Dirty    bool  // the migration to Version failed partway
	Legacy   bool  // no version, but the shop's tables: made before versioned migrations
	Versions []int // the migrations this release has, in order
}

// ReadStatus reads the schema's status. It creates nothing, not even the
// version table.
func ReadStatus(ctx context.Context, gdb *gorm.DB) (Status, error) {
	st := Status{Version: -1}
	var err error
	if st.Versions, err = Versions(gdb); err != nil {
		return st, err
	}
	tables, err := readTables(ctx, gdb)
	if err != nil {
		return st, fmt.Errorf("db: schema: %w", err)
	}
	if _, ok := tables[versionTable]; ok {
		err := gdb.WithContext(ctx).Raw("SELECT version, dirty FROM "+versionTable+" LIMIT 1").Row().Scan(&st.Version, &st.Dirty)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return st, fmt.Errorf("db: schema version: %w", err)
		}
	}
	st.Legacy = st.Version < 0 && hasShopTables(tables)
	return st, nil
}

// versionTable is where golang-migrate records the version.
const versionTable = "schema_migrations"

// Latest is the last version this release has.
func (s Status) Latest() int { return s.Versions[len(s.Versions)-1] }

// Missing lists the versions this release has and the database lacks.
func (s Status) Missing() []int {
	var m []int
	for _, v := range s.Versions {
		if v > s.Version {
			m = append(m, v)
		}
	}
	return m
}

// Check reports why the shop cannot run on this schema as it is, nil when
// it is at the latest version and clean: for an instance that does not
// migrate (SHOP_MIGRATE=off).
func (s Status) Check() error {
	if err := s.refuse(); err != nil {
		return err
	}
	switch missing := s.Missing(); {
	case s.Legacy:
		return fmt.Errorf("%w: it was made before versioned migrations and has no version yet; "+
			"run `shop migrate up` to adopt it at version %d and apply what follows", ErrSchemaBehind, baselineVersion)
	case len(missing) > 0:
		return fmt.Errorf("%w: it is at %s and lacks %s; run `shop migrate up`", ErrSchemaBehind, s.at(), list(missing))
	}
	return nil
}

// refuse reports a schema that no migration of this release may touch: a
// dirty one, or one at a version this release does not know.
func (s Status) refuse() error {
	switch {
	case s.Dirty:
		before := -1
		if i := slices.Index(s.Versions, s.Version); i > 0 {
			before = s.Versions[i-1]
		}
		return fmt.Errorf("%w: the migration to version %d failed partway. Repair the schema by hand, then record it with "+
			"`shop migrate force %d` if all of that migration is in, or `shop migrate force %d` if none of it is",
			ErrSchemaDirty, s.Version, s.Version, before)
	case s.Version > s.Latest():
		return fmt.Errorf("%w: it is at version %d, and this release knows migrations up to %d only: a newer release migrated it. "+
			"Run that release, or first roll its migrations back with its own `shop migrate down N`", ErrSchemaAhead, s.Version, s.Latest())
	case s.Version >= 0 && !slices.Contains(s.Versions, s.Version):
		return fmt.Errorf("%w: it is at version %d, which this release does not have (it has %s)", ErrSchemaUnknown, s.Version, list(s.Versions))
	}
	return nil
}

// explain turns golang-migrate's dirty error, when another instance's
// migration failed meanwhile, into the shop's.
func (s Status) explain(err error) error {
	var dirty migrate.ErrDirty
	if errors.As(err, &dirty) {
		s.Version, s.Dirty = dirty.Version, true
		return s.refuse()
	}
	return err
}

func (s Status) at() string {
	if s.Version < 0 {
		return "no version"
	}
	return fmt.Sprintf("version %d", s.Version)
}

// String is what `shop migrate status` prints.
func (s Status) String() string {
	var b strings.Builder
	switch {
	case s.Legacy:
		b.WriteString("schema: made before versioned migrations, no version yet (`shop migrate up` adopts it at version " + fmt.Sprint(baselineVersion) + ")\n")
	case s.Version < 0:
		b.WriteString("schema: empty, no version\n")
	case s.Dirty:
		fmt.Fprintf(&b, "schema: version %d, dirty (a migration failed)\n", s.Version)
	default:
		fmt.Fprintf(&b, "schema: version %d\n", s.Version)
	}
	fmt.Fprintf(&b, "latest: version %d\n", s.Latest())
	if err := s.refuse(); err != nil {
		fmt.Fprintf(&b, "warning: %v\n", err)
	}
	for _, v := range s.Versions {
		state := "pending"
		if v <= s.Version && !s.Legacy {
			state = "applied"
		}
		fmt.Fprintf(&b, "  %6d  %s\n", v, state)
	}
	return b.String()
}

func list(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	if len(s) == 1 {
		return "version " + s[0]
	}
	return "versions " + strings.Join(s, ", ")
}
