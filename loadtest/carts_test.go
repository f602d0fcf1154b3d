package loadtest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/payment"
	"github.com/stockguard/shop/loadtest"
)

// cartShop is a shop with a payment window: an order holds its unit until
// paid, and one not paid within window gives it back at the next order.
// It refuses a payment whose signature does not verify.
type cartShop struct {
	mu       sync.Mutex
	secret   []byte
	window   time.Duration
	stock    int
	placed   map[int64]time.Time // pending orders, by when placed
	paid     map[int64]string    // paid orders' payment ids
	keys     map[string]bool
	expired  int
	badSigns int
}

func (s *cartShop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/orders/"), "/pay"); ok {
		s.pay(w, r, id)
		return
	}
	s.keys[r.Header.Get("Idempotency-Key")] = true
	for id, at := range s.placed {
		if time.Since(at) > s.window {
			delete(s.placed, id)
			s.stock, s.expired = s.stock+1, s.expired+1
		}
	}
	if s.stock == 0 {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"type":"sold-out"}`)
		return
	}
	s.stock--
	id := int64(len(s.keys))
	s.placed[id] = time.Now()
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d,"status":"pending"}`, id)
}

func (s *cartShop) pay(w http.ResponseWriter, r *http.Request, id string) {
	body, _ := io.ReadAll(r.Body)
	if payment.Verify(s.secret, r.Header.Get(payment.Header), body, time.Now()) != nil {
		s.badSigns++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var p struct {
		PaymentID string `json:"payment_id"`
	}
	json.Unmarshal(body, &p)
	n, _ := strconv.ParseInt(id, 10, 64)
	if _, ok := s.placed[n]; !ok {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"type":"order-expired"}`)
		return
	}
	delete(s.placed, n)
	s.paid[n] = p.PaymentID
	fmt.Fprintf(w, `{"id":%d,"status":"paid"}`, n)
}

// TestCarts: 30% of the first 20 winners never pay; their units come back
// after the window and sell to buyers still trying, who pay, each try
// with a new Idempotency-Key and each payment signed and of its own.
func TestCarts(t *testing.T) {
	t.Parallel()
	shop := &cartShop{secret: []byte(strings.Repeat("k", 32)), window: 300 * time.Millisecond, stock: 20,
		placed: map[int64]time.Time{}, paid: map[int64]string{}, keys: map[string]bool{}}
	srv := httptest.NewServer(shop)
	t.Cleanup(srv.Close)
	c := loadtest.Carts{Burst: loadtest.Burst{Buyers: 50}, Stock: 20, Unpaid: 0.3, Window: shop.window}
	stats, err := c.Run(t.Context(), loadtest.Shop{URLs: []string{srv.URL}, PaymentSecret: shop.secret}, "phone", nil)
	if err != nil {
		t.Fatal(err)
	}
	shop.mu.Lock()
	defer shop.mu.Unlock()
	ids := map[string]bool{}
	for _, p := range shop.paid {
		ids[p] = true
	}
	if len(shop.paid) != 20 || len(ids) != 20 || shop.expired != 6 || len(shop.placed) != 0 || shop.badSigns != 0 {
		t.Errorf("paid %d orders with %d payment ids, %d expired, %d pending, %d bad signatures; want 20, 20, 6, 0, 0",
			len(shop.paid), len(ids), shop.expired, len(shop.placed), shop.badSigns)
	}
	if stats.Carts.Abandoned != 6 || stats.Carts.Payments != 20 || stats.Carts.AllPaid < shop.window.Seconds() {
		t.Errorf("abandoned %d, payments %d, all paid after %.2fs; want 6, 20, after %s", stats.Carts.Abandoned, stats.Carts.Payments, stats.Carts.AllPaid, shop.window)
	}
	if stats.Requests != len(shop.keys) || stats.Requests <= 50 || stats.Ordered != 26 || stats.Errors != 0 {
		t.Errorf("%d requests with %d Idempotency-Keys, %d ordered, %d errors; want one key a try, more tries than buyers, 26 ordered, 0 errors",
			stats.Requests, len(shop.keys), stats.Ordered, stats.Errors)
	}
}
