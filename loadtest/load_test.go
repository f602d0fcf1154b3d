package loadtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/shop/loadtest"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		typ    string
		want   loadtest.Outcome
	}{
		{201, "", loadtest.Ordered},
		{409, "sold-out", loadtest.SoldOut},
		{409, "limit-reached", loadtest.LimitReached},
		{409, "request-in-progress", loadtest.Failed},
		{503, "busy", loadtest.Busy},
		{500, "internal", loadtest.Failed},
		{400, "idempotency-key-missing", loadtest.Failed},
	} {
		if got := loadtest.Classify(tc.status, tc.typ); got != tc.want {
			t.Errorf("Classify(%d, %q) = %s, want %s", tc.status, tc.typ, got, tc.want)
		}
	}
}

// stubShop sells stock units, then answers sold-out, and records the users
// and Idempotency-Keys it saw.
type stubShop struct {
	mu    sync.Mutex
	stock int
	next  int64
	users map[string]int
	keys  map[string]int
	stall func(n int) // called with the request number before answering
}

func (s *stubShop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" { // a connection warmed before a burst of arrivals
		return
	}
	var body struct {
		UserID string `json:"user_id"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	n := len(s.keys)
	s.users[body.UserID]++
	s.keys[r.Header.Get("Idempotency-Key")]++
	sold := s.stock > 0
	if sold {
		s.stock--
		s.next++
	}
	id := s.next
	s.mu.Unlock()
	if s.stall != nil {
		s.stall(n)
	}
	if !sold {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"type":"sold-out","status":409}`)
		return
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d}`, id)
}

func newStub(t *testing.T, stock int) (*stubShop, loadtest.Shop) {
	stub := &stubShop{stock: stock, users: map[string]int{}, keys: map[string]int{}}
	var urls []string
	for range 3 { // three instances of one shop
		srv := httptest.NewServer(stub)
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return stub, loadtest.Shop{URLs: urls}
}

func TestBurst(t *testing.T) {
	t.Parallel()
	for _, concurrency := range []int{0, 7} {
		t.Run(fmt.Sprint("concurrency ", concurrency), func(t *testing.T) {
			t.Parallel()
			stub, shop := newStub(t, 30)
			answers := 0
			var mu sync.Mutex
			stats, err := loadtest.Burst{Buyers: 100, Concurrency: concurrency}.Run(t.Context(), shop, "phone", func(loadtest.Answer) {
				mu.Lock()
				answers++
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
			if stats.Requests != 100 || stats.Ordered != 30 || stats.SoldOut != 70 || stats.Errors != 0 || answers != 100 {
				t.Errorf("requests %d, ordered %d, sold out %d, errors %d, progress %d; want 100, 30, 70, 0, 100",
					stats.Requests, stats.Ordered, stats.SoldOut, stats.Errors, answers)
			}
			if len(stats.Acked) != 30 {
				t.Errorf("%d acknowledged order ids, want 30", len(stats.Acked))
			}
			if len(stub.users) != 100 || len(stub.keys) != 100 {
				t.Errorf("%d distinct users and %d distinct Idempotency-Keys for 100 buyers", len(stub.users), len(stub.keys))
			}
			if stats.Latency.P50 <= 0 || stats.Latency.Max < stats.Latency.P99 {
				t.Errorf("latency %+v is not a distribution", stats.Latency)
			}
		})
	}
}

func TestBurstCountsErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	stats, err := loadtest.Burst{Buyers: 5}.Run(t.Context(), loadtest.Shop{URLs: []string{srv.URL}}, "phone", nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Errors != 5 || stats.FirstError == "" {
		t.Errorf("errors %d, first %q; want 5 and the 500", stats.Errors, stats.FirstError)
	}
}

// A stall of the shop must show in the latency of every request that was
// due during it, not only in the one that was being served.
func TestSteadyHasNoCoordinatedOmission(t *testing.T) {
	t.Parallel()
	stub, shop := newStub(t, 1000)
	stub.stall = func(n int) {
		if n == 0 {
			time.Sleep(150 * time.Millisecond)
		}
	}
	// One request in flight at a time, one due every 10ms.
	stats, err := loadtest.Steady{Rate: 100, Duration: 300 * time.Millisecond, Concurrency: 1}.Run(t.Context(), shop, "phone", nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Requests != 30 {
		t.Fatalf("%d requests, want 30", stats.Requests)
	}
	// The 11 requests due in the first 100ms waited at least 50ms for the
	// stall to end: over a third of the 30.
	if stats.Latency.P90 < 50 {
		t.Errorf("p90 latency %.1fms; the requests queued behind a 150ms stall must count their wait", stats.Latency.P90)
	}
}

// TestClosedSearch: the closed loop's search doubles the buyers while the
// rate grows, stops where it levels off, at a failure, at the p99 bound or
// at its most buyers, and reports the best step within the bound.
func TestClosedSearch(t *testing.T) {
	t.Parallel()
	type step struct {
		rate, p99 float64
		ok        bool
	}
	up := func(rate float64) step { return step{rate: rate, p99: 10, ok: true} }
	for _, tc := range []struct {
		name      string
		max       int
		steps     []step // by buyers: 64, 128, 256, …
		wantBest  int
		wantSteps int
	}{
		{"levels off", 4096, []step{up(100), up(200), up(300), up(310), up(305), up(900)}, 512, 5},
		{"a dip is not the end", 4096, []step{up(100), up(90), up(200), up(205), up(150)}, 512, 5},
		{"grows to the most buyers", 256, []step{up(100), up(200), up(400), up(800)}, 256, 3},
		{"once, at most the first step's buyers", 32, []step{up(100), up(200)}, 64, 1},
		{"p99 bound broken", 4096, []step{up(100), up(200), {rate: 300, p99: 600, ok: true}, up(400)}, 128, 3},
		{"the first step breaks the bound", 4096, []step{{rate: 100, p99: 600, ok: true}, up(200)}, 64, 1},
		{"a failed step is reported", 4096, []step{up(100), {rate: 200, p99: 10}, up(300)}, 128, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadtest.Closed{Buyers: 64, Duration: time.Second, MaxBuyers: tc.max, P99: 500 * time.Millisecond}
			i := 0
			best, steps, err := c.Search(func(buyers int) (loadtest.ClosedStep, bool, error) {
				if want := 64 << i; buyers != want {
					t.Fatalf("step %d has %d buyers, want %d", i, buyers, want)
				}
				s := tc.steps[i]
				i++
				return loadtest.ClosedStep{Buyers: buyers, PerSecond: s.rate, P99: s.p99}, s.ok, nil
			})
			if err != nil || best != tc.wantBest || len(steps) != tc.wantSteps {
				t.Errorf("best %d after %d steps (%v), want %d after %d", best, len(steps), err, tc.wantBest, tc.wantSteps)
			}
		})
	}
}
