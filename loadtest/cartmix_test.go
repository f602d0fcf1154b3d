package loadtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/loadtest"
)

// mixShop sells carts all or nothing from a stock per SKU, and answers a
// cart it cannot fill 409 sold-out naming the SKUs short, unless unnamed.
type mixShop struct {
	mu      sync.Mutex
	stock   map[string]int
	orders  map[int64][]string // by id, the SKUs of each order's lines
	singles int                // orders of one SKU, in the old body
	unnamed bool
}

func (s *mixShop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SKU   string `json:"sku"`
		Items []struct {
			SKU      string `json:"sku"`
			Quantity int    `json:"quantity"`
		} `json:"items"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	defer s.mu.Unlock()
	var skus, short []string
	for _, it := range body.Items {
		if it.Quantity != 1 || slices.Contains(skus, it.SKU) {
			http.Error(w, "a line of one unit per SKU", http.StatusBadRequest)
			return
		}
		skus = append(skus, it.SKU)
	}
	if body.SKU != "" {
		skus, s.singles = append(skus, body.SKU), s.singles+1
	}
	for _, sku := range skus {
		if s.stock[sku] < 1 {
			short = append(short, sku)
		}
	}
	if len(short) > 0 {
		w.WriteHeader(http.StatusConflict)
		named, _ := json.Marshal(short)
		if s.unnamed {
			named = []byte("null")
		}
		fmt.Fprintf(w, `{"type":"sold-out","skus":%s}`, named)
		return
	}
	for _, sku := range skus {
		s.stock[sku]--
	}
	id := int64(len(s.orders) + 1)
	s.orders[id] = skus
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d}`, id)
}

// TestCartMix: with a cart mix, each load's buyers order carts of 2 to 3
// of the hot SKUs, as the API takes a cart; a 201 acknowledges the order
// with its SKUs, and the sold-out answers count by the SKUs they name.
func TestCartMix(t *testing.T) {
	t.Parallel()
	hot := loadtest.HotSKUs("phone", 3)
	loads := map[string]func(loadtest.Shop) (loadtest.Stats, error){
		"burst": func(shop loadtest.Shop) (loadtest.Stats, error) {
			return loadtest.Burst{Buyers: 100, Cart: 3}.Run(t.Context(), shop, "phone", nil)
		},
		"steady": func(shop loadtest.Shop) (loadtest.Stats, error) {
			return loadtest.Steady{Rate: 400, Duration: 250 * time.Millisecond, Cart: 3}.Run(t.Context(), shop, "phone", nil)
		},
		"closed": func(shop loadtest.Shop) (loadtest.Stats, error) {
			return loadtest.Closed{Buyers: 4, Duration: 200 * time.Millisecond, Cart: 3}.Run(t.Context(), shop, "phone", nil)
		},
	}
	for name, load := range loads {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := &mixShop{stock: map[string]int{}, orders: map[int64][]string{}}
			for _, sku := range hot {
				s.stock[sku] = 30
			}
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			stats, err := load(loadtest.Shop{URLs: []string{srv.URL}})
			if err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if stats.Errors != 0 || s.singles != 0 || stats.Ordered != len(s.orders) || len(stats.Acked) != len(s.orders) || stats.SoldOut == 0 {
				t.Fatalf("%d errors (%s), %d orders of one SKU; %d ordered and %d acknowledged of %d orders, %d sold out; want carts only, all acknowledged, some sold out",
					stats.Errors, stats.FirstError, s.singles, stats.Ordered, len(stats.Acked), len(s.orders), stats.SoldOut)
			}
			for _, a := range stats.Acked {
				if !slices.Equal(a.SKUs, s.orders[a.ID]) || len(a.SKUs) < 2 || len(a.SKUs) > 3 {
					t.Errorf("order %d acknowledged with %q, placed with %q; want 2 to 3 SKUs", a.ID, a.SKUs, s.orders[a.ID])
				}
			}
			named := 0
			for sku, n := range stats.SoldOutSKUs {
				if s.stock[sku] != 0 {
					t.Errorf("%d sold-out answers named %s, which has %d left", n, sku, s.stock[sku])
				}
				named += n
			}
			if named < stats.SoldOut {
				t.Errorf("%d sold-out answers named %d SKUs short", stats.SoldOut, named)
			}
		})
	}
	t.Run("sold out naming none", func(t *testing.T) {
		t.Parallel()
		s := &mixShop{stock: map[string]int{}, orders: map[int64][]string{}, unnamed: true}
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		stats, err := loadtest.Burst{Buyers: 5, Cart: 2}.Run(t.Context(), loadtest.Shop{URLs: []string{srv.URL}}, "phone", nil)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Errors != 5 || !strings.Contains(stats.FirstError, "names no SKU short") {
			t.Errorf("%d errors, first %q; want 5, a sold-out cart that names no SKU", stats.Errors, stats.FirstError)
		}
	})
}

// TestCartMixReport: the text and HTML reports show every SKU of a load
// with a cart mix, from its audit.
func TestCartMixReport(t *testing.T) {
	t.Parallel()
	plan := loadtest.Plan{Instances: 1, Stock: 10, Burst: loadtest.Burst{Buyers: 50, Cart: 2}}
	rep := loadtest.NewReport("demo", plan)
	burst := &loadtest.Phase{Stats: loadtest.Stats{SoldOutSKUs: map[string]int{"s-3": 7}}}
	for _, sku := range loadtest.HotSKUs("s", 2) {
		burst.SKUs = append(burst.SKUs, audit.Audit{SKU: sku, Initial: 10, Sold: 10, Orders: 10})
	}
	burst.SKUs[1].Partial = 1
	rep.Results = []loadtest.Result{{Strategy: "atomic", Instances: 1, Burst: burst}}
	var text, html strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if want := "10 units of each of 3 SKUs, 50 buyers, each ordering a cart of 2 of them"; !strings.Contains(text.String(), want) {
		t.Errorf("the text lacks %q:\n%s", want, text.String())
	}
	var rows []string
	for l := range strings.Lines(text.String()) {
		if f := strings.Fields(l); len(f) == 13 && f[1] == "burst" {
			rows = append(rows, strings.Join(f, " "))
		}
	}
	want := []string{"atomic burst s 10 10 10 0 0 0 0 0 0 PASS", "atomic burst s-2 10 10 10 0 0 0 0 1 0 FAIL", "atomic burst s-3 10 10 10 0 0 0 7 0 0 PASS"}
	if !slices.Equal(rows, want) {
		t.Errorf("the text's SKUs %q, want %q:\n%s", rows, want, text.String())
	}
	for _, want := range []string{"Carts, per SKU", "<td class=\"text\">s-3</td>", "drawn from 3 SKUs"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("the HTML lacks %q", want)
		}
	}
}

// TestClosedCartReport: with a cart mix, the text shows the cart mix's
// closed loop beside the single orders', as a fraction of theirs, and a
// cart loop that broke an invariant fails the strategy.
func TestClosedCartReport(t *testing.T) {
	t.Parallel()
	plan := loadtest.Plan{Instances: 1, Stock: 10, Burst: loadtest.Burst{Buyers: 50, Cart: 3},
		Closed: loadtest.Closed{Buyers: 4, Duration: time.Second, Cart: 3}}
	rep := loadtest.NewReport("demo", plan)
	phase := func(orders int, problems ...string) *loadtest.Phase {
		return &loadtest.Phase{Stats: loadtest.Stats{Seconds: 1}, Audit: audit.Audit{Orders: orders}, Problems: problems}
	}
	rep.Results = []loadtest.Result{{Strategy: "batched", Instances: 1, Burst: phase(10),
		Closed: phase(1000), ClosedBuyers: 64, ClosedCart: phase(250, "s-2: oversold"), ClosedCartBuyers: 128, ClosedCartFraction: 0.25,
		ClosedCartSteps: []loadtest.ClosedStep{{Buyers: 64, PerSecond: 200}, {Buyers: 128, PerSecond: 250}}}}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	want := "batched 128 250 250 0 0.0 0.0 0 0 0.25× 64 200, 128 250"
	_, carts, _ := strings.Cut(text.String(), "throughput of carts")
	if !slices.ContainsFunc(slices.Collect(strings.Lines(carts)), func(l string) bool { return strings.Join(strings.Fields(l), " ") == want }) {
		t.Errorf("the text lacks the cart loop's row %q:\n%s", want, text.String())
	}
	if v := rep.Results[0].Verdict(); v != "FAIL" {
		t.Errorf("verdict %s with a failed cart loop, want FAIL", v)
	}
}
