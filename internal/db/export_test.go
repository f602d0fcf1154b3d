package db

import (
	"context"
	"io/fs"

	"gorm.io/gorm"
)

// Baseline and ReadTables let the tests compare the adopted schema with
// the baseline migration's.
var (
	Baseline   = baseline
	ReadTables = readTables
)

// KillConns is the most connections the pool's killer keeps, besides the
// pool's own.
const KillConns = killConns

// MigrateFrom is Migrate with the migrations of src, in the dialect of
// gdb, in place of the shop's; Sources is the shop's, for a test to add to.
func MigrateFrom(ctx context.Context, gdb *gorm.DB, src fs.FS) error { return migrateUp(ctx, gdb, src) }

func Sources(gdb *gorm.DB) fs.FS { return sources[dialect(gdb)] }
