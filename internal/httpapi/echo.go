package httpapi

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
)

// Echo is the shop's HTTP stack with no backends, for the bench's
// http-echo ceiling: the most any strategy can answer over HTTP on a
// machine. It places an order as the shop does, with the same router,
// Idempotency-Key check, body decoding, validation and encoding of the 201,
// but keeps nothing: every order is new, and the stock is whatever the
// admin endpoint was last told.
func Echo() *gin.Engine {
	r := gin.New()
	r.GET("/readyz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ready"}) })
	r.PUT("/api/v1/stock/:sku", func(c *gin.Context) {
		var b stockBody
		if bind(c, &b) && validID(c, "sku", c.Param("sku")) {
			c.JSON(http.StatusOK, gin.H{"sku": c.Param("sku")})
		}
	})
	var next atomic.Int64
	r.POST("/api/v1/orders", func(c *gin.Context) {
		if _, err := idempotency.ParseKey(c.GetHeader(idempotency.Header)); err != nil {
			problem(c, "idempotency-key-missing", err.Error())
			return
		}
		b, ok := orderRequest(c, false)
		if !ok {
			return
		}
		id := next.Add(1)
		c.Header("Location", orderLocation(id))
		writeOrder(c, http.StatusCreated, order.Order{ID: id, SKU: b.SKU, UserID: b.UserID, Quantity: b.Quantity, Status: order.StatusCreated, CreatedAt: time.Now().UTC()})
	})
	return r
}
