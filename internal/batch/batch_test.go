package batch_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/batch"
)

func Example() {
	started, release := make(chan struct{}, 1), make(chan struct{})
	b := batch.New(0, func(sku string, orders []int) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		fmt.Println(sku, orders)
	}, nil)
	_ = b.Add("sku-1", 1) // starts a run that waits for release
	<-started
	_ = b.Add("sku-1", 2) // these two gather for the next run
	_ = b.Add("sku-1", 3)
	close(release)
	b.Close()
	// Output:
	// sku-1 [1]
	// sku-1 [2 3]
}

// TestConcurrent releases many adders at once and checks that every item
// runs exactly once, that a key's runs never overlap and stay within max.
func TestConcurrent(t *testing.T) {
	const keys, perKey, maxItems = 4, 200, 16
	var (
		mu      sync.Mutex
		seen    = make(map[int]int)
		inRun   [keys]atomic.Int32
		overlap atomic.Bool
		tooMany atomic.Bool
	)
	b := batch.New(maxItems, func(key int, items []int) {
		if inRun[key].Add(1) != 1 {
			overlap.Store(true)
		}
		defer inRun[key].Add(-1)
		if len(items) == 0 || len(items) > maxItems {
			tooMany.Store(true)
		}
		time.Sleep(time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			seen[it]++
		}
	}, nil)
	start := make(chan struct{})
	var adders sync.WaitGroup
	for i := range keys * perKey {
		adders.Go(func() {
			<-start
			if err := b.Add(i%keys, i); err != nil {
				t.Errorf("Add: %v", err)
			}
		})
	}
	close(start)
	adders.Wait()
	b.Close()
	if overlap.Load() {
		t.Error("two runs of one key overlapped")
	}
	if tooMany.Load() {
		t.Errorf("a run had no items or more than %d", maxItems)
	}
	if len(seen) != keys*perKey {
		t.Errorf("%d items ran, want %d", len(seen), keys*perKey)
	}
	for it, n := range seen {
		if n != 1 {
			t.Errorf("item %d ran %d times", it, n)
		}
	}
}

func TestCloseWaitsAndRefuses(t *testing.T) {
	release := make(chan struct{})
	var ran atomic.Int32
	b := batch.New(0, func(string, []int) {
		<-release
		ran.Add(1)
	}, nil)
	if err := b.Add("a", 1); err != nil {
		t.Fatalf("Add: %v", err)
	}
	closed := make(chan struct{})
	go func() {
		b.Close()
		close(closed)
	}()
	// Close refuses once called: wait for that, then check it still waits.
	for b.Add("b", 2) == nil {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a run was under way")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-closed
	if n, out := b.Queued("a"); n != 0 || out {
		t.Errorf("Queued after Close = %d, %v; want 0, false", n, out)
	}
	if err := b.Add("a", 3); !errors.Is(err, batch.ErrClosed) {
		t.Errorf("Add after Close = %v, want ErrClosed", err)
	}
}

// TestEnded checks that ended follows a key's last run, before the next
// runs of the key start.
func TestEnded(t *testing.T) {
	var mu sync.Mutex
	var events []string
	b := batch.New(0, func(key string, items []int) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, fmt.Sprint("run ", items))
	}, func(key string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, "ended "+key)
	})
	for i := range 2 {
		if err := b.Add("a", i); err != nil {
			t.Fatalf("Add: %v", err)
		}
		waitFor(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(events) == 2*(i+1)
		})
	}
	b.Close()
	want := fmt.Sprint([]string{"run [0]", "ended a", "run [1]", "ended a"})
	if got := fmt.Sprint(events); got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
