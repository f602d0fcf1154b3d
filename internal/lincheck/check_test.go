package lincheck_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/lincheck"
)

// sale builds a history by hand: times are in milliseconds.
type sale struct {
	ops    []history.Op
	orders []history.FinalOrder
	stock  map[string]int
}

func newSale(units int) *sale {
	s := &sale{stock: map[string]int{"A": units}}
	s.op(history.Op{Kind: history.StockSet, Items: []history.Item{{SKU: "A", Quantity: units}}, Answer: history.OK}, 0, 1)
	return s
}

func (s *sale) op(op history.Op, call, ret int64) *sale {
	op.Client = len(s.ops)
	op.Call, op.Return = call*int64(time.Millisecond), ret*int64(time.Millisecond)
	s.ops = append(s.ops, op)
	return s
}

// order is buyer user's order of one unit of A under key user-k.
func (s *sale) order(user string, call, ret int64, answer history.Answer, id int64) *sale {
	return s.op(history.Op{Kind: history.Order, User: user, Key: user + "-k", Items: []history.Item{{SKU: "A", Quantity: 1}}, Answer: answer, Order: id}, call, ret)
}

// has puts order id of user in the final state.
func (s *sale) has(id int64, user, status string) *sale {
	s.orders = append(s.orders, history.FinalOrder{ID: id, User: user, Key: user + "-k", Items: []history.Item{{SKU: "A", Quantity: 1}}, Status: status})
	return s
}

func (s *sale) check(t *testing.T, available int) lincheck.Result {
	t.Helper()
	end := int64(0)
	for _, op := range s.ops {
		end = max(end, op.Return)
	}
	for _, o := range s.orders {
		end = max(end, o.Deadline+int64(100*time.Millisecond), o.Expired)
	}
	ops := append(s.ops, history.Op{Client: len(s.ops), Kind: history.State, Call: end + int64(time.Millisecond), Return: end + 2*int64(time.Millisecond),
		Answer: history.OK, Final: &history.Final{Stock: []history.Stock{{SKU: "A", Available: available}}, Orders: s.orders}})
	r := lincheck.Check(ops, 10*time.Second)
	t.Log(r)
	if r.Unknown {
		t.Fatalf("no verdict: %s", r.FirstViolation)
	}
	return r
}

func TestImpossibleAnswersRejected(t *testing.T) {
	for _, tc := range []struct {
		name, want string // want: words the first violation must hold
		sale       *sale
		available  int
	}{
		{"oversell", "oversell", newSale(2).
			order("u1", 10, 20, history.Ordered, 1).order("u2", 10, 20, history.Ordered, 2).order("u3", 10, 20, history.Ordered, 3).
			has(1, "u1", "created").has(2, "u2", "created").has(3, "u3", "created"), 0},
		{"sold out before a later buyer won", "sold out", newSale(1).
			order("u1", 10, 20, history.SoldOut, 0).order("u2", 30, 40, history.Ordered, 1).
			has(1, "u2", "created"), 0},
		{"sold out to a buyer whose order exists", "the key's order 1 exists", newSale(1).
			order("u1", 10, 50, history.Busy, 0).order("u1", 60, 70, history.SoldOut, 0).
			has(1, "u1", "created"), 0},
		{"two orders for one key", "two orders for one key", newSale(2).
			order("u1", 10, 20, history.Ordered, 1).
			has(1, "u1", "created").has(2, "u1", "created"), 0},
		{"a replay that names another order", "and order 2", newSale(2).
			order("u1", 10, 20, history.Ordered, 1).order("u1", 30, 40, history.Ordered, 2).
			has(1, "u1", "created"), 1},
		{"a stock read that goes back in time", "a read of 5", newSale(5).
			order("u1", 10, 20, history.Ordered, 1).
			op(history.Op{Kind: history.StockRead, Items: []history.Item{{SKU: "A"}}, Answer: history.OK, Value: ptr(4)}, 30, 40).
			op(history.Op{Kind: history.StockRead, Items: []history.Item{{SKU: "A"}}, Answer: history.OK, Value: ptr(5)}, 50, 60).
			has(1, "u1", "created"), 4},
		{"an acknowledged order lost", "which the database does not have", newSale(2).
			order("u1", 10, 20, history.Ordered, 1), 2},
		{"a refund that returned the stock twice", "refund", newSale(1).
			order("u1", 10, 20, history.Ordered, 1).
			op(history.Op{Kind: history.Refund, User: "u1", Key: "r1", Order: 1, Answer: history.OK}, 30, 40).
			op(history.Op{Kind: history.Refund, User: "u1", Key: "r2", Order: 1, Answer: history.OK}, 50, 60).
			has(1, "u1", "refunded"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.sale.check(t, tc.available)
			if r.Linearizable {
				t.Fatal("accepted an impossible history")
			}
			if !strings.Contains(r.FirstViolation, tc.want) {
				t.Errorf("first violation %q does not say %q", r.FirstViolation, tc.want)
			}
		})
	}
}

func TestPossibleAnswersAccepted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sale      *sale
		available int
	}{
		{"a burst", newSale(2).
			order("u1", 10, 40, history.Ordered, 1).order("u2", 11, 30, history.SoldOut, 0).order("u3", 12, 35, history.Ordered, 2).
			has(1, "u1", "created").has(2, "u3", "created"), 0},
		{"a busy answer that took effect", newSale(1).
			order("u1", 10, 20, history.Busy, 0).order("u2", 30, 40, history.SoldOut, 0).
			has(1, "u1", "created"), 0},
		{"a busy answer that never did", newSale(1).
			order("u1", 10, 20, history.Busy, 0).order("u2", 30, 40, history.Ordered, 1).
			has(1, "u2", "created"), 0},
		{"a retry after busy gets the order", newSale(1).
			order("u1", 10, 20, history.Busy, 0).order("u1", 30, 40, history.Ordered, 1).order("u2", 25, 28, history.SoldOut, 0).
			has(1, "u1", "created"), 0},
		{"a unit back after a refund sells again", newSale(1).
			order("u1", 10, 20, history.Ordered, 1).
			op(history.Op{Kind: history.Refund, User: "u1", Key: "r1", Order: 1, Answer: history.OK}, 30, 40).
			order("u2", 35, 38, history.SoldOut, 0).order("u3", 50, 60, history.Ordered, 2).
			has(1, "u1", "refunded").has(2, "u3", "created"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := tc.sale.check(t, tc.available); !r.Linearizable {
				t.Fatalf("rejected a possible history: %s", r.FirstViolation)
			}
		})
	}
}

// An order left pending past its deadline is cancelled by the shop: a
// step no client asked for, which gives its unit back after the shop's
// stamp and not before.
func TestExpiryIsTheShopsStep(t *testing.T) {
	build := func(wonAt int64) *sale {
		s := newSale(1).order("u1", 10, 20, history.Ordered, 1).
			order("u2", 50, 60, history.SoldOut, 0).order("u3", wonAt, wonAt+10, history.Ordered, 2)
		s.orders = append(s.orders, history.FinalOrder{ID: 1, User: "u1", Key: "u1-k", Items: []history.Item{{SKU: "A", Quantity: 1}},
			Status: "cancelled", Window: true, Expired: 100 * int64(time.Millisecond)})
		s.orders = append(s.orders, history.FinalOrder{ID: 2, User: "u3", Key: "u3-k", Items: []history.Item{{SKU: "A", Quantity: 1}}, Status: "pending", Window: true})
		return s
	}
	if r := build(200).check(t, 0); !r.Linearizable {
		t.Errorf("a unit sold again after its expiry was rejected: %s", r.FirstViolation)
	}
	if r := build(70).check(t, 0); r.Linearizable {
		t.Error("a unit sold again before the shop's stamp of its expiry was accepted")
	}
}

// A burst as the demo sends it, 2,000 buyers for 100 units at once: the
// verdict comes, and one oversold unit is caught in it.
func TestBurstOfTwoThousand(t *testing.T) {
	for _, oversell := range []bool{false, true} {
		t.Run(fmt.Sprint("oversell=", oversell), func(t *testing.T) {
			r := burst(2000, 100, oversell).check(t, 0)
			if r.Linearizable == oversell {
				t.Fatalf("linearizable %v, want %v: %s", r.Linearizable, !oversell, r.FirstViolation)
			}
		})
	}
}

// burst is buyers sent within 100 ms, each answered 50 to 1,000 ms later:
// the first units of them ordered in the order they were served, every
// other sold out once the last unit went; busy answers on one in fifty.
func burst(buyers, units int, oversell bool) *sale {
	rng := rand.New(rand.NewPCG(1, 2))
	s := newSale(units)
	won := units
	if oversell {
		won++
	}
	lastWin := int64(0)
	for i := range buyers {
		call := 10 + int64(i)*100/int64(buyers)
		user := fmt.Sprint("u", i)
		switch {
		case i < won:
			ret := call + 50 + rng.Int64N(900)
			lastWin = max(lastWin, call)
			s.order(user, call, ret, history.Ordered, int64(i+1)).has(int64(i+1), user, "created")
		case i%50 == 0:
			s.order(user, call, call+50+rng.Int64N(900), history.Busy, 0)
		default:
			s.order(user, call, max(call, lastWin)+1+rng.Int64N(900), history.SoldOut, 0)
		}
	}
	return s
}

func ptr(n int) *int { return &n }

// A payment is refused order-expired once the order's deadline has
// passed, though the shop has not cancelled it yet; before the deadline a
// pending order takes its payment.
func TestPaymentDeadline(t *testing.T) {
	ms := int64(time.Millisecond)
	build := func(payAt int64, answer history.Answer, status string) *sale {
		s := newSale(1).order("u1", 10, 20, history.Ordered, 1).
			op(history.Op{Kind: history.Pay, Key: "pay-1", Order: 1, Answer: answer}, payAt, payAt+10)
		o := history.FinalOrder{ID: 1, User: "u1", Key: "u1-k", Items: []history.Item{{SKU: "A", Quantity: 1}},
			Status: status, Window: true, Deadline: 500 * ms}
		if status == "cancelled" {
			o.Expired = 900 * ms
		}
		s.orders = append(s.orders, o)
		return s
	}
	for _, tc := range []struct {
		name   string
		payAt  int64
		answer history.Answer
		status string
		want   bool
	}{
		{"paid before the deadline", 100, history.OK, "paid", true},
		{"refused after the deadline, before the expiry", 700, "order-expired", "cancelled", true},
		{"refused before the deadline", 100, "order-expired", "cancelled", false},
		{"paid after the deadline", 700, history.OK, "paid", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			available := 0
			if tc.status == "cancelled" {
				available = 1
			}
			if r := build(tc.payAt, tc.answer, tc.status).check(t, available); r.Linearizable != tc.want {
				t.Errorf("linearizable %v, want %v: %s", r.Linearizable, tc.want, r.FirstViolation)
			}
		})
	}
}
