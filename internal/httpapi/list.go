package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/stockguard/shop/internal/order"
)

// Page sizes of the order list.
const (
	defaultPage = 20
	maxPage     = 100
)

func (a *api) listOrders(c *gin.Context) {
	p, ok := pageQuery(c, []string{"user_id", "sku"})
	if !ok {
		return
	}
	r := order.ListRequest{SKU: c.Query("sku"), After: p.after, Limit: p.limit}
	named := c.Query("user_id")
	if !optionalID(c, "user_id", named, a.Buyers != nil) || (r.SKU != "" && !validID(c, "sku", r.SKU)) {
		return
	}
	var err error
	if r.UserID, err = a.user(c, named); err != nil {
		a.fail(c, err)
		return
	}
	orders, err := a.Orders.List(c.Request.Context(), r)
	if err != nil {
		a.fail(c, err)
		return
	}
	page := struct {
		Orders []order.Order `json:"orders"`
		// Next is the after of the next page, absent on the last one.
		Next *int64 `json:"next_after,omitempty"`
	}{Orders: orders}
	if page.Orders == nil {
		page.Orders = []order.Order{}
	}
	page.Next = nextAfter(orders, r.Limit, func(o order.Order) int64 { return o.ID })
	c.JSON(http.StatusOK, page)
}

// nextAfter is the after of the page that follows items, a page of at
// most limit, or nil when items is the last page.
func nextAfter[T any](items []T, limit int, id func(T) int64) *int64 {
	if len(items) < limit {
		return nil
	}
	n := id(items[len(items)-1])
	return &n
}

// page is a list's page: the items with an id above after, at most limit.
type page struct {
	after int64
	limit int
}

// pageQuery reads a list's after and limit, refusing a query parameter
// that is neither those nor one of others.
func pageQuery(c *gin.Context, others []string) (page, bool) {
	for k := range c.Request.URL.Query() {
		if k != "after" && k != "limit" && !slices.Contains(others, k) {
			problem(c, "invalid-request", fmt.Sprintf("unknown query parameter %q", k))
			return page{}, false
		}
	}
	var limit int64 = defaultPage
	p := page{}
	ok := intParam(c, "after", 0, math.MaxInt64, &p.after) && intParam(c, "limit", 1, maxPage, &limit)
	p.limit = int(limit)
	return p, ok
}

// intParam reads an optional integer query parameter within [lo, hi].
func intParam(c *gin.Context, name string, lo, hi int64, v *int64) bool {
	s, ok := c.GetQuery(name)
	if !ok {
		return true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		problem(c, "invalid-request", fmt.Sprintf("%s must be an integer from %d to %d", name, lo, hi))
		return false
	}
	*v = n
	return true
}

func orderID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		problem(c, "invalid-request", "order id must be a positive integer")
		return 0, false
	}
	return id, true
}

func (a *api) getOrder(c *gin.Context) {
	id, ok := orderID(c)
	if !ok {
		return
	}
	var o order.Order
	var err error
	if a.Buyers != nil {
		o, err = a.Orders.Owned(c.Request.Context(), id, c.GetString(buyerKey))
	} else {
		o, err = a.Orders.Get(c.Request.Context(), id)
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	writeOrder(c, http.StatusOK, o)
}
