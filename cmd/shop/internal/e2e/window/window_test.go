package window

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/lua/redisstock"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/payment"
	"github.com/stockguard/shop/internal/strategy"
)

// The payment window on three `shop serve` processes, for every guarded
// strategy: one sale each, whose phases check from the database and the
// events stream what the window promises. Orders are paid by signed
// callbacks, or cancelled by the expiry job; never both, with the stock
// back exactly once; under faults of the job's runner and of the relay.
// Each phase's history, every order, payment, cancel and stock change
// with its answer, is checked against the shop's model.

const (
	// windowSKUs share the orders: a lock strategy's lock serves one SKU
	// at a time.
	windowSKUs = 4
	// windowArrival spreads the buyers' arrivals: one comes every
	// windowArrival until the faults of the expiry job's runners are over,
	// so that deadlines pass, and orders are placed and paid, before,
	// during and after them.
	windowArrival = 40 * time.Millisecond
	// windowMaxBuyers bounds the buyers of deadlines, as many as come in
	// 80 s; each SKU has its share of them in stock.
	windowMaxBuyers = 2000
	windowStock     = windowMaxBuyers / windowSKUs
	// payBefore and payAfter spread each callback around its order's
	// deadline, by the test's clock: sent up to payBefore before it, up to
	// payAfter after it, so that it arrives, some milliseconds later, on
	// either side of it.
	payBefore = 200 * time.Millisecond
	payAfter  = 20 * time.Millisecond
	callbacks = 200
)

// TestWindow sells with a payment window on every guarded strategy.
func TestWindow(t *testing.T) {
	t.Parallel()
	for _, s := range strategy.All() {
		if s.Name == "none" || s.Name == "local" { // unguarded across three shops
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			// The relay waits for the last phase: the events pile up.
			w, held := newWindowSale(t, s, "relay")
			t.Run("one payment", w.onePayment)
			t.Run("deadlines", w.deadlines)
			t.Run("late and refused", w.lateAndRefused)
			t.Run("relay killed", func(t *testing.T) { w.relayKilled(t, held["relay"]) })
		})
	}
}

// onePayment: 200 concurrent callbacks with one payment id, spread over
// the shops, make one payment, and are answered alike, all but one as
// replays; 200 with different ids for one order pay it once, and the
// other 199 are kept as orphaned, answered already-paid.
func (w *windowSale) onePayment(t *testing.T) {
	const sku = "once"
	w.Rec = history.NewRecorder()
	w.putStock(t, sku, 2)
	w.warm(t, 50)
	one, err1 := w.place(t.Context(), 0, sku, "ann", "once-ann")
	many, err2 := w.place(t.Context(), 1, sku, "bob", "once-bob")
	if err1 != nil || err2 != nil || one.code != http.StatusCreated || many.code != http.StatusCreated || one.Status != order.StatusPending {
		t.Fatalf("orders: %+v, %v; %+v, %v", one, err1, many, err2)
	}
	answers := make([]windowReply, 2*callbacks)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callbacks {
		wg.Go(func() {
			<-gate
			var err error
			if answers[i], err = w.pay(t.Context(), i, one.ID, "once-same"); err != nil {
				t.Errorf("callback %d: %v", i, err)
			}
		})
		wg.Go(func() {
			<-gate
			var err error
			if answers[callbacks+i], err = w.pay(t.Context(), i, many.ID, fmt.Sprint("once-", i)); err != nil {
				t.Errorf("callback %d: %v", callbacks+i, err)
			}
		})
	}
	close(gate)
	wg.Wait()
	fresh, paidMany := 0, ""
	for i, a := range answers {
		switch {
		case i < callbacks && (a.code != http.StatusOK || a.PaymentID == nil || *a.PaymentID != "once-same"):
			t.Errorf("callback %d with one payment id: %+v", i, a)
		case i < callbacks && !a.replayed:
			fresh++
		case i >= callbacks && a.code == http.StatusOK:
			if paidMany != "" {
				t.Errorf("order %d paid twice: by %s, then by %+v", many.ID, paidMany, a)
			}
			paidMany = fmt.Sprint("once-", i-callbacks)
		case i >= callbacks && (a.code != http.StatusConflict || a.Type != "already-paid"):
			t.Errorf("callback %d with its own payment id: %+v, want 200 or 409 already-paid", i, a)
		}
	}
	if fresh != 1 {
		t.Errorf("%d answers to one payment id were not marked replayed, want 1", fresh)
	}
	for _, c := range []struct {
		id       int64
		paid     string
		orphaned int
	}{{one.ID, "once-same", 0}, {many.ID, paidMany, callbacks - 1}} {
		var paid []string
		var orphaned int
		w.GDB.Raw(`SELECT payment_id FROM payments WHERE order_id = ? AND status = 'paid'`, c.id).Scan(&paid)
		w.GDB.Raw(`SELECT COUNT(*) FROM payments WHERE order_id = ? AND status = 'orphaned' AND reason = 'already-paid'`, c.id).Scan(&orphaned)
		if !slices.Equal(paid, []string{c.paid}) || orphaned != c.orphaned {
			t.Errorf("order %d: paid by %v, %d orphaned; want paid by %s, %d orphaned", c.id, paid, orphaned, c.paid, c.orphaned)
		}
	}
	w.audited(t, sku, 2, 2)
	w.CheckHistory(t, sku)
}

// raced is one buyer of deadlines: its order, whether it cancels it
// rather than pay, or abandons it, when its callback or cancel was sent
// against the order's deadline, and the answer.
type raced struct {
	order    windowReply
	cancels  bool
	abandons bool          // neither pays nor cancels
	early    time.Duration // before the deadline; negative after it
	answer   windowReply
}

// Of every cancelEvery buyers of deadlines, one cancels its order at the
// deadline rather than pay, and one abandons it, so that the expiry job
// has orders to cancel throughout the sale, whatever the callbacks' timing.
const cancelEvery = 10

// deadlines: buyers order, of four SKUs, one every windowArrival, and the
// callback of each order lands around its deadline, from before to after,
// while the expiry job cancels the orders past theirs; one buyer in ten
// cancels its order there instead, and one in ten abandons it. Meanwhile
// the shop running the job is killed mid-run, and the next one is paused
// past its lease; the buyers keep coming until both faults are over, and
// the job, run by another shop, then expires orders whose deadline came
// after them. Each order ends either paid or cancelled, never both, as its
// callback or its buyer was told; each cancelled order returned its unit
// once; every expired order is cancelled; the audit holds.
func (w *windowSale) deadlines(t *testing.T) {
	const skus = "deadline-%"
	w.Rec = history.NewRecorder()
	var names []string
	for i := range windowSKUs {
		names = append(names, fmt.Sprint("deadline-", i))
		w.putStock(t, names[i], windowStock)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	faulted := make(chan struct{}) // closed once the faults are over
	var healed time.Time           // when
	go func() {
		defer close(faulted)
		w.awaitCancelled(t, skus) // the job is at work
		if o := w.caught(t, "expiry"); o != nil {
			w.kill(t, o)
			t.Logf("killed the expiry job's runner %s mid-run", o.Base)
		}
		w.pauseRunner(t)
		healed = time.Now()
	}()
	buyers := make([]raced, windowMaxBuyers)
	var wg sync.WaitGroup
	n, start := 0, time.Now()
arrivals:
	for ; n < len(buyers); n++ {
		select {
		case <-faulted:
			break arrivals
		case <-time.After(time.Until(start.Add(time.Duration(n) * windowArrival))):
		}
		i := n
		wg.Go(func() {
			b := &buyers[i]
			b.cancels, b.abandons = i%cancelEvery == cancelEvery-1, i%cancelEvery == cancelEvery/2
			var err error
			if b.order, err = w.place(ctx, i, fmt.Sprint("deadline-", i%windowSKUs), fmt.Sprint("u", i), fmt.Sprint("k", i)); err != nil || b.order.code != http.StatusCreated || b.order.ExpiresAt == nil {
				t.Errorf("buyer %d: %+v, %v", i, b.order, err)
				return
			}
			if b.abandons {
				return
			}
			land := b.order.ExpiresAt.Add(rand.N(payBefore+payAfter) - payBefore)
			time.Sleep(time.Until(land))
			b.early = b.order.ExpiresAt.Sub(time.Now())
			if b.cancels {
				b.answer, err = w.cancel(ctx, i, b.order.ID, fmt.Sprint("u", i))
			} else {
				b.answer, err = w.pay(ctx, i, b.order.ID, fmt.Sprint("pay-", i))
			}
			if err != nil {
				t.Errorf("buyer %d's callback or cancel: %v", i, err)
			}
		})
	}
	<-faulted
	if n == len(buyers) {
		t.Errorf("the faults were not over when the last of %d buyers came", n)
	}
	wg.Wait()
	buyers = buyers[:n]
	w.drained(t, skus)
	var last time.Time
	w.GDB.Raw(`SELECT MAX(cancelled_at) FROM orders WHERE sku LIKE ?`, skus).Scan(&last)
	t.Logf("%d buyers came in %v; the last order was cancelled %v after the faults were over", n, time.Since(start).Round(time.Millisecond), last.Sub(healed).Round(time.Millisecond))
	w.checkRaced(t, skus, buyers)
	w.expiredAfter(t, skus, buyers, healed)
	w.CheckHistory(t, names...)
}

// expiredAfter checks that the sale went on through the faults that
// ended at healed: the expiry job, run by another shop, expired orders
// whose deadline came after them.
func (w *windowSale) expiredAfter(t *testing.T, skus string, buyers []raced, healed time.Time) {
	t.Helper()
	rows, expired := w.rows(t, skus), 0
	for _, b := range buyers {
		if o, ok := rows[b.order.ID]; ok && b.order.ExpiresAt != nil && o.Events == "placed,expired" && b.order.ExpiresAt.After(healed) {
			expired++
		}
	}
	if expired == 0 {
		t.Error("no order whose deadline came after the faults expired: the sale was over before the expiry job's runners were killed and paused")
	}
	t.Logf("%d orders whose deadline came after the faults expired", expired)
}

// awaitCancelled waits until the expiry job has cancelled an order of the
// SKUs like skus.
func (w *windowSale) awaitCancelled(t *testing.T, skus string) {
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var n int
		if w.GDB.Raw(`SELECT COUNT(*) FROM orders WHERE sku LIKE ? AND status = 'cancelled' AND cancel_key IS NULL`, skus).Scan(&n); n > 0 {
			return
		}
	}
	t.Error("the expiry job cancelled nothing within a minute")
}

// drained waits until no order of the SKUs like skus is pending, and logs
// how long after its deadline the expiry job cancelled each order it
// cancelled.
func (w *windowSale) drained(t *testing.T, skus string) {
	t.Helper()
	var pending int
	for end := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if err := w.GDB.Raw(`SELECT COUNT(*) FROM orders WHERE sku LIKE ? AND status = 'pending'`, skus).Scan(&pending).Error; err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(end) {
			for j, o := range w.Shops {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				req, _ := http.NewRequestWithContext(ctx, "GET", o.Debug+"/debug/pprof/goroutine?debug=2", nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					os.WriteFile(fmt.Sprintf("/tmp/gz-%s-%d.txt", w.Strategy, j), b, 0o644)
				}
				cancel()
			}
			t.Fatalf("%d orders of %s still pending a minute after the last callback", pending, skus)
		}
	}
	var late []struct{ ExpiresAt, CancelledAt time.Time }
	w.GDB.Raw(`SELECT expires_at, cancelled_at FROM orders WHERE sku LIKE ? AND status = 'cancelled' AND cancel_key IS NULL`, skus).Scan(&late)
	var after []time.Duration
	for _, o := range late {
		after = append(after, o.CancelledAt.Sub(o.ExpiresAt))
	}
	if slices.Sort(after); len(after) > 0 {
		t.Logf("%d orders expired, cancelled after their deadline by: median %v, 99th percentile %v, at most %v", len(after),
			after[len(after)/2].Round(time.Millisecond), after[len(after)*99/100].Round(time.Millisecond), after[len(after)-1].Round(time.Millisecond))
	}
}

// row is an order as the database has it.
type row struct {
	ID          int64
	Status      string
	PaidAt      *time.Time
	CancelledAt *time.Time
	PaymentID   *string
	Payments    string // its payments, as id:status:reason, by id
	Events      string // its events' types, in their order
}

// rows reads the orders of the SKUs like skus, their payments and their
// events.
func (w *windowSale) rows(t *testing.T, skus string) map[int64]row {
	t.Helper()
	var rs []row
	err := w.GDB.Raw(`SELECT o.id, o.status, o.paid_at, o.cancelled_at, o.payment_id,
		(SELECT COALESCE(GROUP_CONCAT(CONCAT(p.payment_id, ':', p.status, ':', COALESCE(p.reason, '')) ORDER BY p.payment_id), '') FROM payments p WHERE p.order_id = o.id) AS payments,
		(SELECT COALESCE(GROUP_CONCAT(e.type ORDER BY e.id), '') FROM order_events e WHERE e.order_id = o.id) AS events
		FROM orders o WHERE o.sku LIKE ?`, skus).Scan(&rs).Error
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[int64]row, len(rs))
	for _, r := range rs {
		m[r.ID] = r
	}
	return m
}

// checkRaced checks each buyer's order against what its callback or its
// buyer was told, and audits the SKUs like skus.
func (w *windowSale) checkRaced(t *testing.T, skus string, buyers []raced) {
	t.Helper()
	rows := w.rows(t, skus)
	outcomes := map[string]int{}
	crossed, paid := 0, make([]int, windowSKUs)
	for i, b := range buyers {
		if b.order.code != http.StatusCreated {
			continue // reported
		}
		o, ok := rows[b.order.ID]
		outcome, want := raceOutcome(b, fmt.Sprint("pay-", i))
		switch {
		case !ok:
			t.Errorf("buyer %d: no order %d", i, b.order.ID)
		case o.PaidAt != nil && o.CancelledAt != nil:
			t.Errorf("buyer %d: order %+v both paid and cancelled", i, o)
		case want == nil:
			t.Errorf("buyer %d: %s answered %+v", i, outcome, b.answer)
		case o.Status != want[0] || o.Payments != want[1] || o.Events != want[2]:
			t.Errorf("buyer %d: %s, but the order is %+v; want %s with the payments %q and the events %s", i, outcome, o, want[0], want[1], want[2])
		default:
			outcomes[outcome]++
			paid[i%windowSKUs] += b2int(o.Status == order.StatusPaid)
			crossed += b2int(!b.abandons && (b.answer.code == http.StatusOK) != (b.early > 0))
		}
	}
	t.Logf("%v; %d answered otherwise than the test's clock would say", outcomes, crossed)
	for i, n := range paid {
		w.audited(t, fmt.Sprint("deadline-", i), windowStock, n)
	}
}

// raceOutcome names what b was told, and what its order must be then:
// its status, its payments and its events.
func raceOutcome(b raced, paymentID string) (string, []string) {
	expired := b.answer.code == http.StatusConflict && b.answer.Type == "order-expired"
	switch {
	case b.abandons:
		return "abandoned, expired", []string{order.StatusCancelled, "", "placed,expired"}
	case !b.cancels && b.answer.code == http.StatusOK:
		return "paid", []string{order.StatusPaid, paymentID + ":paid:", "placed,paid"}
	case !b.cancels && expired:
		return "callback refused, expired", []string{order.StatusCancelled, paymentID + ":orphaned:order-expired", "placed,expired"}
	case b.cancels && b.answer.code == http.StatusOK:
		return "cancelled by its buyer", []string{order.StatusCancelled, "", "placed,cancelled"}
	case b.cancels && expired:
		return "cancel refused, expired", []string{order.StatusCancelled, "", "placed,expired"}
	case b.cancels:
		return "the cancel", nil
	}
	return "the callback", nil
}

// shopPay runs `shop pay` for order id, again while the shop answers 5xx,
// as a script would, and returns what it printed. Each run is recorded in
// rec.
func shopPay(t *testing.T, rec *history.Recorder, base string, id int64, paymentID string) (string, error) {
	env := func(k string) string { return map[string]string{"SHOP_PAYMENT_SECRET": windowSecret}[k] }
	op := history.Op{Client: rec.Client(), Kind: history.Pay, Key: paymentID, Order: id}
	for end := time.Now().Add(answerWithin); ; time.Sleep(50 * time.Millisecond) {
		var out strings.Builder
		var err error
		shoptest.Recorded(rec, op, func() (windowReply, error) {
			err = shoptest.Run(t.Context(), []string{"pay", fmt.Sprint(id), paymentID, "--url", base}, env, &out, io.Discard)
			// The status line, then the answer's body after an empty line.
			var r windowReply
			if _, scan := fmt.Sscanf(out.String(), "HTTP/1.1 %d", &r.code); scan != nil {
				return r, err
			}
			_, body, _ := strings.Cut(out.String(), "\n\n")
			return r, json.Unmarshal([]byte(body), &r)
		})
		status, _, _ := strings.Cut(out.String(), "\n")
		if !strings.HasPrefix(strings.TrimPrefix(status, "HTTP/1.1 "), "5") || time.Now().After(end) {
			return out.String(), err
		}
	}
}

func b2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// audited checks the audit of sku, on sale with initial units of which
// paid are paid, and, under lua, that Redis has what the database has.
func (w *windowSale) audited(t *testing.T, sku string, initial, paid int) {
	t.Helper()
	a, err := audit.SKU(t.Context(), w.GDB, sku, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Violations(); len(v) > 0 || a.Initial != initial || a.Orders != paid || a.Available != initial-paid || a.Pending != 0 {
		t.Errorf("audit %+v: %v; want %d paid orders and the rest of %d available", a, v, paid, initial)
	}
	if w.Strategy != "lua" {
		return
	}
	// Redis learns of a unit returned by a shop that died before telling
	// it from the reconcile job.
	var st redisstock.State
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if st, err = redisstock.New(w.RDB, w.Prefix).State(t.Context(), sku); err == nil && st.Available == a.Available {
			return
		}
	}
	t.Errorf("Redis has %+v (%v), the database %d available", st, err, a.Available)
}

// lateAndRefused: with the expiry job held back, callbacks with a bad
// signature, an old one or none, and a cancel by another buyer, are
// refused 401 and 404, and change nothing; callbacks after the deadline,
// sent with `shop pay`, are refused order-expired, and kept as orphaned,
// while the orders stay pending. Once the job runs again, it cancels them
// and their units come back.
func (w *windowSale) lateAndRefused(t *testing.T) {
	const sku, late = "late", 5
	w.Rec = history.NewRecorder()
	w.putStock(t, sku, late+1)
	held := w.hold(t, "expiry")
	ctx := t.Context()
	var orders []windowReply
	for i := range late + 1 {
		o, err := w.place(ctx, i, sku, fmt.Sprint("late-", i), "late")
		if err != nil || o.code != http.StatusCreated {
			t.Fatalf("order %d: %+v, %v", i, o, err)
		}
		orders = append(orders, o)
	}
	refused := orders[late]
	pay := history.Op{Client: w.Rec.Client(), Kind: history.Pay, Key: "refused", Order: refused.ID}
	body := []byte(`{"payment_id":"refused"}`)
	path := fmt.Sprintf("/api/v1/orders/%d/pay", refused.ID)
	base := w.up()[0].Base
	for _, c := range []struct {
		name, signature string
		want            int
	}{
		{"no signature", "", http.StatusUnauthorized},
		{"another secret", payment.Sign([]byte("another secret, of at least 32 bytes"), time.Now(), body), http.StatusUnauthorized},
		{"another body", payment.Sign([]byte(windowSecret), time.Now(), []byte(`{"payment_id":"other"}`)), http.StatusUnauthorized},
		{"six minutes old", payment.Sign([]byte(windowSecret), time.Now().Add(-6*time.Minute), body), http.StatusUnauthorized},
	} {
		if r, err := w.sendOp(ctx, pay, base, "POST", path, body, payment.Header, c.signature); err != nil || r.code != c.want || r.Type != "unauthorized" {
			t.Errorf("%s: %+v, %v; want %d unauthorized", c.name, r, err, c.want)
		}
	}
	mallory := history.Op{Client: w.Rec.Client(), Kind: history.Cancel, User: "mallory", Key: "mallory", Order: refused.ID}
	r, err := w.sendOp(ctx, mallory, base, "POST", fmt.Sprintf("/api/v1/orders/%d/cancel", refused.ID), []byte(`{"user_id":"mallory"}`), "Idempotency-Key", "mallory")
	if err != nil || r.code != http.StatusNotFound {
		t.Errorf("another buyer's cancel: %+v, %v; want 404", r, err)
	}
	if o := w.rows(t, sku)[refused.ID]; o.Status != order.StatusPending || o.PaidAt != nil || o.CancelledAt != nil || o.Payments != "" || o.Events != "placed" {
		t.Errorf("after the refusals: %+v, want it pending, with no payment and no event but placed", o)
	}

	for deadline := *orders[late].ExpiresAt; !dbNow(t, w.GDB).After(deadline); time.Sleep(10 * time.Millisecond) {
	}
	for i, o := range orders[:late] {
		if out, err := shopPay(t, w.Rec, base, o.ID, fmt.Sprint("late-pay-", i)); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(out, `"type":"order-expired"`) {
			t.Errorf("shop pay past the deadline: %v\n%s", err, out)
		}
	}
	rows := w.rows(t, sku)
	for i, o := range orders[:late] {
		if r := rows[o.ID]; r.Status != order.StatusPending || r.Payments != fmt.Sprintf("late-pay-%d:orphaned:order-expired", i) {
			t.Errorf("paid late, before any expiry run: %+v, want it pending with its payment orphaned", r)
		}
	}
	if a, _ := audit.SKU(ctx, w.GDB, sku, 0, nil); a.Available != 0 {
		t.Errorf("%d units back before any expiry run", a.Available)
	}

	release(t, held)
	w.drained(t, sku)
	for _, o := range w.rows(t, sku) {
		if o.Status != order.StatusCancelled || o.Events != "placed,expired" {
			t.Errorf("once the job ran: %+v, want it cancelled by the job", o)
		}
	}
	w.audited(t, sku, late+1, 0)
	w.CheckHistory(t, sku)
}
