package shoptest

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHoldSale: more tests than turns ask for a sale's turn at once; no
// more than the turns hold one at a time, every one gets its turn, and a
// subtest of a holder runs in its parent's turn. Without the locks, all
// hold at once; without the parent's turn, the subtest waits for ever
// while every turn is held.
func TestHoldSale(t *testing.T) {
	turns := max(2, runtime.NumCPU())
	var now, most, ran atomic.Int32
	var wg sync.WaitGroup
	for range turns + 2 {
		wg.Go(func() {
			t.Run("sale", func(t *testing.T) {
				holdSale(t)
				n := now.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				t.Run("inner", func(t *testing.T) { holdSale(t) })
				time.Sleep(100 * time.Millisecond)
				now.Add(-1)
				ran.Add(1)
			})
		})
	}
	wg.Wait()
	if m := most.Load(); m > int32(turns) {
		t.Errorf("%d sales held a turn at once, want at most %d", m, turns)
	}
	if r := ran.Load(); r != int32(turns+2) {
		t.Errorf("%d of %d sales ran", r, turns+2)
	}
}
