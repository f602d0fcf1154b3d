package shoptest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBuildOnce: test processes that need the binary at once, as the
// packages of `go test ./...` do, wait for one build of it, and then all
// run that file. Here they are goroutines, each with a lock file of its
// own open, which excludes the others as another process's would, and a
// build that takes a while.
func TestBuildOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var builds atomic.Int32
	compile := func(out string) error {
		builds.Add(1)
		time.Sleep(200 * time.Millisecond) // the others start waiting meanwhile
		return os.WriteFile(out, []byte("the binary"), 0o755)
	}
	bins, errs := make([]string, 3), make([]error, 3)
	var wg sync.WaitGroup
	for i := range bins {
		wg.Go(func() { bins[i], errs[i] = cached(dir, "shop-key", compile) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("test %d: %v", i, err)
		}
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds for %d tests at once; want 1", n, len(bins))
	}
	if bins[1] != bins[0] || bins[2] != bins[0] {
		t.Errorf("the tests run %v; want one binary", bins)
	}
	if b, err := os.ReadFile(bins[0]); err != nil || string(b) != "the binary" {
		t.Errorf("%s: %q, %v; want what the build wrote", bins[0], b, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"shop-key", "shop-key.lock"}) {
		t.Errorf("the cache holds %v; want the binary and its lock, nothing half built", names)
	}
}

// TestSourcesOfTheBinary: the binary's key covers the files it is built
// from, those that it embeds too: a change to any of them gives a new
// binary, not the one built before it.
func TestSourcesOfTheBinary(t *testing.T) {
	t.Parallel()
	root, files, err := sources()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go.mod", "go.sum", "cmd/shop/main.go", "internal/httpapi/httpapi.go", "internal/db/migrations/mysql/000001_baseline.up.sql"} {
		if !slices.Contains(files, filepath.Join(root, want)) {
			t.Errorf("%s is not among the binary's sources", want)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			t.Errorf("%s, a test file, is among the binary's sources", f)
		}
	}
}
