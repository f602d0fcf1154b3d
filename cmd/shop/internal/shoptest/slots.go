package shoptest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The sales of the fault tests and of the payment window are CPU-bound
// bursts on three shops each, with 2 s request timeouts. Go runs two test
// packages at a time here, each a test per CPU: unbounded, four such sales
// ran at once on two cores, the load average passed 20, and an election's
// buyers timed out. holdSale bounds them, across every test process, to
// one per CPU, at least two, as many as ran at once when they were one
// package.

var (
	holdersMu sync.Mutex
	holders   = map[string]bool{} // the tests of this process that hold a sale's turn
)

// holdSale waits until t may run a sale, and holds its turn until t ends.
// A test whose parent holds one already runs in its turn.
func holdSale(t *testing.T) {
	t.Helper()
	if holding(t.Name()) {
		return
	}
	dir := cacheDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	turns := max(2, runtime.NumCPU())
	for waited := time.Duration(0); ; waited += 50 * time.Millisecond {
		for i := range turns {
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("sale-%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
				f.Close()
				continue
			}
			if waited > 0 {
				t.Logf("waited %v for one of the %d sales at once", waited, turns)
			}
			holdersMu.Lock()
			holders[t.Name()] = true
			holdersMu.Unlock()
			t.Cleanup(func() {
				holdersMu.Lock()
				delete(holders, t.Name())
				holdersMu.Unlock()
				f.Close() // and with it the lock
			})
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("no sale's turn came: %v", t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// holding reports whether the test named name, or a parent of it, holds
// a sale's turn.
func holding(name string) bool {
	holdersMu.Lock()
	defer holdersMu.Unlock()
	for h := range holders {
		if name == h || strings.HasPrefix(name, h+"/") {
			return true
		}
	}
	return false
}
