package testinfra

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/stockguard/shop/internal/db"
)

// Embedded reports whether the shared servers are embedded: under
// go test -short, MySQL and Redis give each test an SQLite file of its own
// and a key prefix on a miniredis, the backends `shop demo` runs on with no
// server, so that -short is fast and still runs every test that can run
// on them.
func Embedded() bool { return testing.Short() }

// NeedsRealServers skips t under -short, where the backends are embedded,
// saying why the test needs the real servers. A test calls it before it
// asks for a server when it relies on something SQLite or miniredis does
// not do as MySQL or Redis does.
func NeedsRealServers(t testing.TB, why string) {
	t.Helper()
	if Embedded() {
		t.Skipf("testinfra: -short runs on SQLite and miniredis; this test needs the real servers: %s", why)
	}
}

// skipShort skips t under -short, which has no embedded stand-in for what.
func skipShort(t testing.TB, what string) {
	t.Helper()
	if Embedded() {
		t.Skipf("testinfra: -short has no embedded stand-in for %s; run without -short", what)
	}
}

// sqliteDSN is a fresh SQLite database in the test's temporary directory.
func sqliteDSN(t testing.TB) string {
	return db.SQLitePrefix + filepath.Join(t.TempDir(), "shop.db")
}

// sharedMiniredis is the embedded Redis that every test of the binary
// shares, each under its own prefix, as they share a real one.
var sharedMiniredis = sync.OnceValues(func() (string, error) {
	m, err := startMiniredis()
	if err != nil {
		return "", err
	}
	return m.Addr(), nil // closed when the test binary exits
})

// startMiniredis starts a miniredis whose keys expire in real time, as a
// real Redis's do: by default its clock stands still, and a lock whose
// release was lost would be held for ever.
func startMiniredis() (*miniredis.Miniredis, error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	return m, m.Start()
}

// OwnRedis returns the address of a Redis of the test's own, independent
// of every other, as Redlock's masters must be: a redis-server started for
// the test (see StartRedis), or under -short a miniredis; either is
// stopped at cleanup.
func OwnRedis(t testing.TB) string {
	t.Helper()
	if !Embedded() {
		return StartRedis(t).Addr()
	}
	m, err := startMiniredis()
	if err != nil {
		t.Fatalf("testinfra: miniredis: %v", err)
	}
	t.Cleanup(m.Close)
	return m.Addr()
}
