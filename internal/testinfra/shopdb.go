package testinfra

import (
	"testing"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
)

// ShopDB opens dsn, usually from MySQL, with the shop's schema migrated; it
// is closed at cleanup.
func ShopDB(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	gdb := OpenDB(t, dsn)
	if err := db.Migrate(t.Context(), gdb); err != nil {
		t.Fatal(err)
	}
	return gdb
}

// OpenDB opens dsn as it is, migrating nothing; it is closed at cleanup.
func OpenDB(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	gdb, err := db.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(gdb) })
	return gdb
}
