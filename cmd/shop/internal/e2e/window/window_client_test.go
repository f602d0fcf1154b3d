package window

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/payment"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/strategy/strategytest"
	"github.com/stockguard/shop/internal/testinfra"
)

// What the payment window tests send, and how they find, kill and pause
// the shop that runs a job.

const (
	windowSecret = "a payment secret of at least 32 bytes, for the tests"
	// windowLength is SHOP_PAYMENT_WINDOW: the 400 concurrent callbacks
	// of the one-payment phase must pay within it. 2 s fell short at a
	// load average of 20: no callback of 200 had paid by the deadline.
	windowLength = 4 * time.Second
	expiryEvery  = 100 * time.Millisecond // SHOP_EXPIRY_INTERVAL
	jobTTL       = time.Second            // SHOP_LOCK_TTL, as shoptest.StartSale sets it
)

// windowSale is a strategy on three shops with a payment window, over a
// Redis of its own, whose requests go to the shops that are up.
type windowSale struct {
	*shoptest.Sale
	client *http.Client
	// jobs is the shops' lock of their jobs, which the test takes to hold
	// a job back: with a TTL of its own, longer than the subtests that run
	// before the hold is released take on a machine starved of the CPU
	// (seen: 53 s).
	jobs lock.Locker

	mu   sync.Mutex
	down map[*shoptest.Shop]bool // killed, or paused
}

// newWindowSale starts strategy s on three shops. held names jobs that
// the test holds back from the start: the shops run them once released.
func newWindowSale(t *testing.T, s strategy.Strategy, held ...string) (*windowSale, map[string]*lock.Lease) {
	t.Helper()
	dsn := testinfra.MySQL(t)
	redisAddr := testinfra.StartRedis(t).Addr()
	prefix := "shop:" + s.Name + ":" // shoptest.StartSale's
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	w := &windowSale{jobs: lock.NewRedis(rdb, &lock.RedisOptions{TTL: 5 * time.Minute, Prefix: prefix + "lock:"}), down: map[*shoptest.Shop]bool{},
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100}}}
	t.Cleanup(w.client.CloseIdleConnections)
	leases := map[string]*lock.Lease{}
	for _, job := range held {
		leases[job] = w.hold(t, job)
	}
	env := append(strategytest.Environ(strategytest.NeedsEnv(t, s)), "SHOP_PAYMENT_WINDOW="+windowLength.String(),
		"SHOP_PAYMENT_SECRET="+windowSecret, "SHOP_EXPIRY_INTERVAL="+expiryEvery.String())
	w.Sale = shoptest.StartSale(t, s.Name, dsn, testinfra.ShopDB(t, dsn), redisAddr, env)
	if w.Prefix != prefix {
		t.Fatalf("the shops' Redis prefix is %s, not %s", w.Prefix, prefix)
	}
	return w, leases
}

// hold takes the lock of the shops' job, so that none of them runs it
// until the test releases it.
func (w *windowSale) hold(t *testing.T, job string) *lock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lease, err := w.jobs.Acquire(ctx, jobKey(job))
	if err != nil {
		t.Fatalf("holding the job %s: %v", job, err)
	}
	return lease
}

// jobKey is the lock name of a job, as lock.Job names it.
func jobKey(job string) string { return "job:" + job }

// release lets the shops run the job again.
func release(t *testing.T, lease *lock.Lease) {
	t.Helper()
	if err := lease.Release(context.WithoutCancel(t.Context())); err != nil {
		t.Fatalf("releasing a job: %v; the test's hold was lost", err)
	}
}

// up returns the shops that are neither killed nor paused.
func (w *windowSale) up() []*shoptest.Shop {
	w.mu.Lock()
	defer w.mu.Unlock()
	var up []*shoptest.Shop
	for _, o := range w.Shops {
		if !w.down[o] {
			up = append(up, o)
		}
	}
	return up
}

func (w *windowSale) setDown(o *shoptest.Shop, down bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down[o] = down
}

// windowReply is an answer of the API: an order, or a problem.
type windowReply struct {
	code      int
	replayed  bool
	wait      time.Duration // as its Retry-After asks, bounded; 0 without one
	ID        int64         `json:"id"`
	Status    any           `json:"status"` // an order's, or a problem's HTTP status
	ExpiresAt *time.Time    `json:"expires_at"`
	PaymentID *string       `json:"payment_id"`
	Type      string        `json:"type"`
	Detail    string        `json:"detail"`
	SKUs      []string      `json:"skus"` // a sold-out problem's short SKUs
}

func (r windowReply) Heard() shoptest.Heard {
	return shoptest.Heard{Code: r.code, Type: r.Type, Order: r.ID, Short: r.SKUs}
}

// send sends a request to base and decodes the answer.
func (w *windowSale) send(ctx context.Context, base, method, path string, body []byte, header ...string) (windowReply, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return windowReply{}, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return windowReply{}, err
	}
	defer resp.Body.Close()
	r := windowReply{code: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true", wait: shoptest.RetryAfter(resp.Header)}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// answerWithin bounds the retries of one request: one that no shop
// answers in a minute never will.
const answerWithin = time.Minute

// retried sends a request to the shops that are up, one after another,
// until one answers it below 500 and not request-in-progress, as a client
// retries, after the answer's Retry-After if it has one. The request is
// made afresh for each attempt, and each is recorded as op, of a client
// of its own.
func (w *windowSale) retried(ctx context.Context, i int, op history.Op, method, path string, request func() ([]byte, []string)) (windowReply, error) {
	ctx, cancel := context.WithTimeout(ctx, answerWithin)
	defer cancel()
	op.Client = w.Rec.Client()
	var last windowReply
	var lastErr error
	for attempt := i; ; attempt++ {
		if up := w.up(); len(up) > 0 {
			body, header := request()
			r, err := w.sendOp(ctx, op, up[attempt%len(up)].Base, method, path, body, header...)
			if err == nil && r.code < 500 && r.Type != "request-in-progress" {
				return r, nil
			}
			last, lastErr = r, err
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("no answer but %d %s (%v) before %w", last.code, last.Type, lastErr, ctx.Err())
		case <-time.After(cmp.Or(last.wait, 50*time.Millisecond)):
		}
	}
}

// sendOp sends a request to base, and records it as op.
func (w *windowSale) sendOp(ctx context.Context, op history.Op, base, method, path string, body []byte, header ...string) (windowReply, error) {
	return shoptest.Recorded(w.Rec, op, func() (windowReply, error) { return w.send(ctx, base, method, path, body, header...) })
}

// place orders one unit of sku for user, under key.
func (w *windowSale) place(ctx context.Context, i int, sku, user, key string) (windowReply, error) {
	op := history.Op{Kind: history.Order, User: user, Key: key, Items: []history.Item{{SKU: sku, Quantity: 1}}}
	body := []byte(shoptest.OrderBody(op))
	return w.retried(ctx, i, op, "POST", "/api/v1/orders", func() ([]byte, []string) { return body, []string{"Idempotency-Key", key} })
}

// pay sends the payment provider's callback: order id paid by paymentID.
func (w *windowSale) pay(ctx context.Context, i int, id int64, paymentID string) (windowReply, error) {
	body := []byte(fmt.Sprintf(`{"payment_id":%q}`, paymentID))
	op := history.Op{Kind: history.Pay, Key: paymentID, Order: id}
	return w.retried(ctx, i, op, "POST", fmt.Sprintf("/api/v1/orders/%d/pay", id), func() ([]byte, []string) {
		return body, []string{payment.Header, payment.Sign([]byte(windowSecret), time.Now(), body)}
	})
}

// warm opens n connections to each shop that is up and leaves them idle,
// so that a storm of requests after it arrives at once, not as fast as
// connections open.
func (w *windowSale) warm(t *testing.T, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for _, o := range w.up() {
		for range n {
			wg.Go(func() {
				if r, err := w.send(t.Context(), o.Base, "GET", "/healthz", nil); err != nil || r.code != http.StatusOK {
					t.Errorf("%s/healthz: %+v, %v", o.Base, r, err)
				}
			})
		}
	}
	wg.Wait()
}

// cancel cancels order id as its buyer, user.
func (w *windowSale) cancel(ctx context.Context, i int, id int64, user string) (windowReply, error) {
	body := []byte(fmt.Sprintf(`{"user_id":%q}`, user))
	key := fmt.Sprint("cancel-", id)
	op := history.Op{Kind: history.Cancel, User: user, Key: key, Order: id}
	return w.retried(ctx, i, op, "POST", fmt.Sprintf("/api/v1/orders/%d/cancel", id), func() ([]byte, []string) {
		return body, []string{"Idempotency-Key", key}
	})
}

// putStock puts n units of sku on sale.
func (w *windowSale) putStock(t *testing.T, sku string, n int) {
	t.Helper()
	op := history.Op{Kind: history.StockSet, Items: []history.Item{{SKU: sku, Quantity: n}}}
	r, err := w.retried(t.Context(), 0, op, "PUT", "/api/v1/stock/"+sku, func() ([]byte, []string) {
		return []byte(fmt.Sprintf(`{"quantity":%d}`, n)), []string{"Authorization", "Bearer secret"}
	})
	if err != nil || r.code != http.StatusOK {
		t.Fatalf("put stock %s: %+v, %v", sku, r, err)
	}
}

// dbNow reads the database's clock.
func dbNow(t *testing.T, gdb *gorm.DB) time.Time {
	t.Helper()
	now, err := db.Now(gdb.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	return now
}
