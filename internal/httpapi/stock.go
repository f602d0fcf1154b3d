package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/stock"
)

// The stock endpoints: the admin's changes of a SKU's stock (a set,
// compare-and-set with expected_available, an adjustment by a delta), its
// movements, and its stock for anyone. See docs/api.md#stock-changes.

// MaxStock bounds a SKU's stock, and an adjustment's delta either way.
const MaxStock = 1_000_000_000

type stockBody struct {
	Quantity *int `json:"quantity"`
	// ExpectedAvailable makes the change a compare-and-set: nothing
	// changes unless it is the current available (409 stale).
	ExpectedAvailable *int `json:"expected_available"`
}

func (a *api) putStock(c *gin.Context) {
	sku := c.Param("sku")
	var b stockBody
	if !bind(c, &b) || !validID(c, "sku", sku) {
		return
	}
	if b.Quantity == nil || *b.Quantity < 0 || *b.Quantity > MaxStock {
		problem(c, "invalid-request", fmt.Sprintf("quantity must be an integer from 0 to %d", MaxStock))
		return
	}
	if b.ExpectedAvailable != nil && (*b.ExpectedAvailable < 0 || *b.ExpectedAvailable > math.MaxInt32) {
		problem(c, "invalid-request", fmt.Sprintf("expected_available must be an integer from 0 to %d", math.MaxInt32))
		return
	}
	var s order.Stock
	var err error
	if b.ExpectedAvailable != nil {
		s, err = a.Orders.SetStockExpected(c.Request.Context(), sku, *b.Quantity, *b.ExpectedAvailable)
	} else {
		s, err = a.Orders.SetStock(c.Request.Context(), sku, *b.Quantity)
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s)
}

func (a *api) deleteStock(c *gin.Context) {
	if !a.AllowReset {
		problem(c, "forbidden", "deleting a SKU deletes its orders and what its buyers hold, which this shop does not allow: "+
			"it runs without SHOP_ALLOW_RESET=true. PUT /api/v1/stock/{sku} changes the stock and keeps them")
		return
	}
	sku := c.Param("sku")
	if !validID(c, "sku", sku) {
		return
	}
	if err := a.Orders.DeleteStock(c.Request.Context(), sku); err != nil {
		a.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (a *api) getStock(c *gin.Context) {
	sku := c.Param("sku")
	if !validID(c, "sku", sku) {
		return
	}
	s, err := a.Orders.Stock(c.Request.Context(), sku)
	if err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s)
}

type adjustmentBody struct {
	Delta     int          `json:"delta"`
	Reason    stock.Reason `json:"reason"`
	Reference string       `json:"reference"`
}

// adjustmentKeys keeps adjustments' Idempotency-Keys in the key store, as
// orders' are, each SKU's apart: a repeat gets the first answer, a refusal
// too. The database's unique index on the key decides when the store
// cannot (order.Service.Adjust).
func (a *api) adjustmentKeys() gin.HandlerFunc {
	if a.Idempotency == nil {
		return func(*gin.Context) {}
	}
	return idempotency.Middleware(idempotency.MiddlewareConfig{Store: a.Idempotency, MaxBody: MaxBodyBytes, Fail: a.fail, Log: a.Log,
		Admit: func(c *gin.Context, _ string) (string, error) { return "admin\n" + c.Param("sku"), nil }})
}

// postAdjustment applies an operator's adjustment of a SKU's stock.
func (a *api) postAdjustment(c *gin.Context) {
	key, err := idempotency.ParseKey(c.GetHeader(idempotency.Header))
	if err != nil {
		a.fail(c, err)
		return
	}
	sku := c.Param("sku")
	var b adjustmentBody
	if !bind(c, &b) || !validID(c, "sku", sku) || !validAdjustment(c, b) {
		return
	}
	m, replayed, err := a.Orders.Adjust(c.Request.Context(), stock.Movement{SKU: sku, Delta: b.Delta, Reason: b.Reason, Reference: b.Reference, Key: &key})
	if replayed {
		c.Header(idempotency.ReplayedHeader, "true")
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, m)
}

// validAdjustment answers 400 unless b is an adjustment.
func validAdjustment(c *gin.Context, b adjustmentBody) bool {
	var reasons []string
	for _, r := range stock.AdjustmentReasons {
		reasons = append(reasons, string(r))
	}
	switch {
	case b.Delta == 0 || b.Delta < -MaxStock || b.Delta > MaxStock:
		problem(c, "invalid-request", fmt.Sprintf("delta must be a non-zero integer from -%d to %d", MaxStock, MaxStock))
	case !b.Reason.Adjustable():
		problem(c, "invalid-request", "reason must be one of "+strings.Join(reasons, ", "))
	case utf8.RuneCountInString(b.Reference) > stock.MaxReference:
		problem(c, "invalid-request", fmt.Sprintf("reference must be at most %d characters", stock.MaxReference))
	default:
		return true
	}
	return false
}

// listMovements pages a SKU's movements, oldest first, as listOrders pages
// orders.
func (a *api) listMovements(c *gin.Context) {
	sku := c.Param("sku")
	p, ok := pageQuery(c, nil)
	if !ok || !validID(c, "sku", sku) {
		return
	}
	ms, err := a.Orders.Movements(c.Request.Context(), sku, p.after, p.limit)
	if err != nil {
		a.fail(c, err)
		return
	}
	page := struct {
		Movements []stock.Movement `json:"movements"`
		Next      *int64           `json:"next_after,omitempty"`
	}{Movements: ms}
	if page.Movements == nil {
		page.Movements = []stock.Movement{}
	}
	page.Next = nextAfter(ms, p.limit, func(m stock.Movement) int64 { return m.ID })
	c.JSON(http.StatusOK, page)
}
