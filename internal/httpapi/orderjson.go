package httpapi

import (
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/stockguard/shop/internal/order"
)

// An order's answer is written by hand (order.Order.AppendJSON), byte for
// byte what c.JSON would write.

// jsonContentType is the Content-Type that gin's c.JSON sets.
const jsonContentType = "application/json; charset=utf-8"

// answers holds the buffers orders are encoded into.
var answers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeOrder answers status with o as JSON, as c.JSON(status, o) would.
func writeOrder(c *gin.Context, status int, o order.Order) {
	buf := answers.Get().(*[]byte)
	defer answers.Put(buf)
	var ok bool
	if *buf, ok = o.AppendJSON((*buf)[:0]); !ok {
		c.JSON(status, o)
		return
	}
	c.Data(status, jsonContentType, *buf)
}

// orderLocation is the Location of the order id.
func orderLocation(id int64) string {
	return "/api/v1/orders/" + strconv.FormatInt(id, 10)
}
