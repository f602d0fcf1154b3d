package testinfra

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// Embedded reports whether the tests run on embedded backends instead of
// servers: under go test -short.
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
