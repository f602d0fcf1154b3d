package loadtest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/shop/loadtest"
)

// sale returns n buyers arriving 1 ms apart, each answered 5 ms after it
// was sent; winners are the ranks (1-based) that won, busy those answered
// busy, and every other buyer is told sold out.
func sale(n int, winners, busy []int) []loadtest.Arrival {
	arrivals := make([]loadtest.Arrival, n)
	for i := range arrivals {
		sent := time.Duration(i) * time.Millisecond
		arrivals[i] = loadtest.Arrival{Rank: i + 1, Sent: sent, Answered: sent + 5*time.Millisecond, Outcome: loadtest.SoldOut}
	}
	for _, r := range winners {
		arrivals[r-1].Outcome = loadtest.Ordered
	}
	for _, r := range busy {
		arrivals[r-1].Outcome = loadtest.Busy
	}
	return arrivals
}

// ranks returns from, from+1, ..., to.
func ranks(from, to int) []int {
	var r []int
	for i := from; i <= to; i++ {
		r = append(r, i)
	}
	return r
}

func TestFair(t *testing.T) {
	t.Parallel()
	slow := sale(4, []int{1, 2}, nil)
	slow[3].Answered = 100 * time.Millisecond // sent at 3 ms
	for _, tc := range []struct {
		name     string
		arrivals []loadtest.Arrival
		gap      time.Duration
		want     loadtest.Fairness
	}{
		{"first come, first served", sale(100, ranks(1, 10), nil), 10 * time.Millisecond,
			loadtest.Fairness{FirstComeShare: 1, LatestWinnerRank: 10, Winners: 10}},
		{"reverse order", sale(100, ranks(91, 100), nil), 10 * time.Millisecond,
			// Winner r overtakes the refused ranks 1..r-10.
			loadtest.Fairness{FirstComeShare: 0, Overtakes: 81 + 82 + 83 + 84 + 85 + 86 + 87 + 88 + 89 + 90, OvertakesPer1000: 85500,
				MaxOvertakeGapMS: 99, LatestWinnerRank: 100, Winners: 10}},
		{"within the gap is no overtake", sale(20, []int{1, 2, 3, 4, 14}, nil), 10 * time.Millisecond,
			// 14 was sent at 13 ms, the first refused, 5, at 4 ms: 9 ms before.
			loadtest.Fairness{FirstComeShare: 0.8, LatestWinnerRank: 14, Winners: 5}},
		{"at the gap is an overtake", sale(20, []int{1, 2, 3, 4, 15}, nil), 10 * time.Millisecond,
			loadtest.Fairness{FirstComeShare: 0.8, Overtakes: 1, OvertakesPer1000: 200, MaxOvertakeGapMS: 10, LatestWinnerRank: 15, Winners: 5}},
		{"busy is refused", sale(20, []int{2, 15}, []int{1}), 10 * time.Millisecond,
			// 15 overtakes 1 (busy) and 3, 4, 5 (sold out).
			loadtest.Fairness{FirstComeShare: 0.5, Overtakes: 4, OvertakesPer1000: 2000, MaxOvertakeGapMS: 14, LatestWinnerRank: 15, Winners: 2}},
		{"longest wait", slow, 10 * time.Millisecond,
			loadtest.Fairness{FirstComeShare: 1, LatestWinnerRank: 2, Winners: 2, LongestWaitMS: 97, LongestWaitRank: 4}},
		{"nobody won", sale(5, nil, nil), 10 * time.Millisecond, loadtest.Fairness{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := loadtest.Fair(tc.arrivals, tc.gap)
			want := tc.want
			want.GapMS = 10
			if want.LongestWaitRank == 0 && len(tc.arrivals) > 0 {
				want.LongestWaitMS, want.LongestWaitRank = 5, 1 // every buyer waited 5 ms; the first is named
			}
			if got != want {
				t.Errorf("Fair:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// reverseShop is a strategy that serves buyers in reverse order of their
// arrival: it holds every request until all have arrived, then sells its
// stock to the last ones in.
type reverseShop struct {
	mu      sync.Mutex
	buyers  int
	stock   int
	arrived int
	all     chan struct{}
}

func (s *reverseShop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" { // a connection warmed before the burst
		return
	}
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.arrived++
	rank := s.arrived
	if rank == s.buyers {
		close(s.all)
	}
	s.mu.Unlock()
	<-s.all
	if rank <= s.buyers-s.stock {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"type":"sold-out","status":409}`)
		return
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d}`, rank)
}

// TestFairnessCanFail: buyers sent in order to a shop that serves them in
// reverse order are measured as served unfairly; the same buyers to a
// shop that serves them as they come, as fairly.
func TestFairnessCanFail(t *testing.T) {
	t.Parallel()
	const buyers, stock = 100, 10
	burst := loadtest.Burst{Buyers: buyers, Arrivals: 500 * time.Millisecond}
	for _, tc := range []struct {
		name string
		shop http.Handler
		fair bool
	}{
		{"reverse", &reverseShop{buyers: buyers, stock: stock, all: make(chan struct{})}, false},
		{"in order", &stubShop{stock: stock, users: map[string]int{}, keys: map[string]int{}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tc.shop)
			defer srv.Close()
			stats, err := burst.Run(t.Context(), loadtest.Shop{URLs: []string{srv.URL}}, "sku", nil)
			if err != nil {
				t.Fatal(err)
			}
			f := burst.Fairness(stats)
			if f == nil || f.Winners != stock {
				t.Fatalf("fairness %+v, want %d winners", f, stock)
			}
			// Sends 5 ms apart, each on time: the figures depend on the
			// order the shop served, and on a machine that stalls requests
			// for longer, a little on that too (seen: share 0.8, latest
			// winner 23, under -race with the machine loaded).
			if tc.fair && (f.FirstComeShare < 0.6 || f.LatestWinnerRank > buyers/2) {
				t.Errorf("in order: %+v, want a first-come share near 1 and no overtakes", f)
			}
			if !tc.fair && (f.FirstComeShare > 0.2 || f.OvertakesPer1000 < 10_000 || f.LatestWinnerRank < buyers-stock) {
				t.Errorf("reverse: %+v, want a first-come share near 0 and many overtakes", f)
			}
			for i, a := range stats.Arrivals {
				if a.Rank != i+1 || a.Sent < time.Duration(i)*5*time.Millisecond || a.Answered < a.Sent {
					t.Fatalf("arrival %d: %+v, want rank %d sent at %s or later", i, a, i+1, time.Duration(i)*5*time.Millisecond)
				}
			}
		})
	}
}
