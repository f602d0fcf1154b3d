package history

import (
	"fmt"
	"net/http"
)

// Kind is what an operation asks.
type Kind string

// The operations a client sends, and the final state.
const (
	Order       Kind = "order"        // an order of one SKU or a cart: Items, under User and Key
	Refund      Kind = "refund"       // Order's refund, under User and Key
	Cancel      Kind = "cancel"       // Order's cancellation by its buyer, under User and Key
	Pay         Kind = "pay"          // Order's payment callback; Key is the payment_id
	StockSet    Kind = "stock-set"    // PUT stock: Items[0].Quantity units on sale now
	StockAdjust Kind = "stock-adjust" // an adjustment by Items[0].Quantity, under Key
	StockRead   Kind = "stock-read"   // GET stock: Value is the available stock read
	OrderRead   Kind = "order-read"   // GET order: Status is the order's status read
	State       Kind = "state"        // the final state, read from the database
)

// Answer is what an operation was told.
type Answer string

// The answers. Busy, InProgress and Error are unknown: the operation took
// effect at one point after its call, or never. Every other 4xx is its
// problem type (already-refunded, order-expired, stale, …).
const (
	Ordered    Answer = "ordered"       // 201: Order is the order's id
	OK         Answer = "ok"            // a refund, cancel, payment or stock change that took effect; a read
	SoldOut    Answer = "sold-out"      // 409 sold-out: Short names the SKUs short
	Limit      Answer = "limit-reached" // 409 limit-reached
	Busy       Answer = "busy"          // 503
	InProgress Answer = "request-in-progress"
	Error      Answer = "error" // a transport error, a timeout, any other 5xx
)

// Unknown reports whether a says nothing of what the operation did.
func (a Answer) Unknown() bool { return a == Busy || a == InProgress || a == Error }

// AnswerOf maps an HTTP answer to its Answer: status and, for an error,
// its problem type. err is a transport error or a timeout.
func AnswerOf(status int, problemType string, err error) Answer {
	switch {
	case err != nil || status >= 500 && status != http.StatusServiceUnavailable:
		return Error
	case status == http.StatusServiceUnavailable:
		return Busy
	case status == http.StatusCreated && problemType == "":
		return Ordered
	case status < 300:
		return OK
	case problemType == "":
		return Answer(fmt.Sprint("http-", status))
	}
	return Answer(problemType)
}

// Item is a line of an order, or the SKU and quantity of a stock change.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"qty"`
}

// Op is one operation: what a client asked, when, and what it was told.
type Op struct {
	Client int    `json:"client"`
	Kind   Kind   `json:"op"`
	User   string `json:"user,omitempty"`
	Key    string `json:"key,omitempty"`
	Items  []Item `json:"items,omitempty"`
	// Order is the order an order was answered with, or the order a
	// refund, cancel, payment or read names.
	Order  int64  `json:"order,omitempty"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	Answer Answer `json:"answer"`
	// Short is the SKUs that a sold-out named.
	Short []string `json:"short,omitempty"`
	// Value is a stock read's available stock.
	Value *int `json:"value,omitempty"`
	// Status is an order read's status.
	Status string `json:"status,omitempty"`
	// Final is the final state, on the State operation.
	Final *Final `json:"state,omitempty"`
}

// SKUs returns the SKUs that op touches.
func (op Op) SKUs() []string {
	skus := make([]string, 0, len(op.Items))
	for _, it := range op.Items {
		skus = append(skus, it.SKU)
	}
	if op.Final != nil {
		for _, s := range op.Final.Stock {
			skus = append(skus, s.SKU)
		}
	}
	return skus
}

// Final is a sale's final state, read from the database once every
// operation has returned.
type Final struct {
	Stock  []Stock      `json:"stock"`
	Orders []FinalOrder `json:"orders"`
	// ClockError bounds, in nanoseconds, how far an order's Deadline and
	// Expired may be from the moments the database stamped, in the
	// recording clock.
	ClockError int64 `json:"clock_error,omitempty"`
}

// Stock is a SKU's available stock.
type Stock struct {
	SKU       string `json:"sku"`
	Available int    `json:"available"`
}

// FinalOrder is an order as the database has it at the end.
type FinalOrder struct {
	ID     int64  `json:"id"`
	User   string `json:"user"`
	Key    string `json:"key"`
	Items  []Item `json:"items"`
	Status string `json:"status"`
	// Window is whether the order was placed with a payment window: it
	// was pending until paid, cancelled or expired.
	Window bool `json:"window,omitempty"`
	// Deadline is when the order's payment window ended, and Expired when
	// the shop cancelled it after that: a step the shop took by itself.
	// Both are in the recording clock.
	Deadline int64 `json:"deadline,omitempty"`
	Expired  int64 `json:"expired,omitempty"`
}
