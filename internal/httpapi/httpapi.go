// Package httpapi is the shop's HTTP API: the gin router, its handlers, and
// the mapping of domain errors to RFC 9457 problem+json.
package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	apispec "github.com/stockguard/shop/api"
	"github.com/stockguard/shop/internal/buyer"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/payment"
	"github.com/stockguard/shop/internal/tracing"
)

// Limits on input.
const (
	// MaxHeaderBytes bounds a request's headers: ample for a buyer's JWT,
	// an Idempotency-Key and a request id, where net/http would take 1 MiB.
	MaxHeaderBytes = 16 << 10
	MaxBodyBytes   = 8 << 10
	MaxQuantity    = 100
	MaxIDLength    = 64
	MaxLines       = order.MaxLines // of a cart
)

// Config is what the router needs.
type Config struct {
	Strategy string // its name, for the metrics
	// Orders keeps its buyers' Idempotency-Keys for orders
	// (order.Service.StoresKeys, with order.Options.Keys): the key store
	// is for refunds, cancels and adjustments.
	Orders      *order.Service
	Idempotency *idempotency.Store
	AdminToken  string // empty refuses the admin endpoints
	// AllowReset lets the admin delete a SKU with its orders; without it,
	// DELETE /api/v1/stock/{sku} is forbidden.
	AllowReset bool
	// Buyers verifies buyer tokens. With nil, the buyer is the user_id the
	// request names: anyone can act as anyone.
	Buyers *buyer.Verifier
	// PaymentSecret verifies the payment callbacks' signatures; empty
	// refuses every callback.
	PaymentSecret []byte
	// Rate limits each buyer's orders and refunds; nil is no limit.
	Rate           *buyer.Limiter
	RequestTimeout time.Duration
	Ready          func(context.Context) error // nil error: ready
	Log            *slog.Logger
}

type api struct {
	Config
}

func init() { gin.SetMode(gin.ReleaseMode) }

// New returns the router.
func New(cfg Config) *gin.Engine {
	a := &api{Config: cfg}
	r := gin.New()
	r.HandleMethodNotAllowed = true
	// A gin.Context passed as a ctx, as to the logger, finds the values of
	// the request's ctx, such as its id.
	r.ContextWithFallback = true
	if tracing.Enabled() {
		r.Use(traceRequest)
	}
	r.Use(requestID, observe, a.recover)
	r.NoRoute(func(c *gin.Context) { problem(c, "not-found", "no such endpoint") })
	r.NoMethod(func(c *gin.Context) { problem(c, "method-not-allowed", "") })

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", a.ready)
	r.GET("/api/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", apispec.OpenAPI) })

	// A buyer's refund or cancel is authenticated, then admitted (its user
	// checked against the token's, then the rate limit), and only then
	// reserved under its Idempotency-Key: a request turned away leaves
	// nothing under its key. An order is admitted by postOrder, and its
	// key kept by the order service.
	idem := idempotency.Middleware(idempotency.MiddlewareConfig{Store: a.Idempotency, MaxBody: MaxBodyBytes, Admit: a.admit, Fail: a.fail, Log: a.Log})
	v1 := r.Group("/api/v1", a.timeout)
	v1.PUT("/stock/:sku", a.admin, a.putStock)
	v1.DELETE("/stock/:sku", a.admin, a.deleteStock)
	v1.GET("/stock/:sku", a.getStock)
	v1.POST("/stock/:sku/adjustments", a.admin, a.adjustmentKeys(), a.postAdjustment)
	v1.GET("/stock/:sku/movements", a.admin, a.listMovements)
	v1.POST("/orders", a.countOrders, a.authenticate, a.postOrder)
	v1.GET("/orders", a.authenticate, a.listOrders)
	v1.GET("/orders/:id", a.authenticate, a.getOrder)
	v1.POST("/orders/:id/refund", a.authenticate, idem, a.refundOrder)
	v1.POST("/orders/:id/cancel", a.countOrders, a.authenticate, idem, a.cancelOrder)
	v1.POST("/orders/:id/pay", a.countOrders, a.payOrder)
	return r
}

type orderBody struct {
	SKU      string       `json:"sku"`
	UserID   string       `json:"user_id"`
	Quantity int          `json:"quantity"`
	Items    []order.Line `json:"items"`
}

// orderRequest decodes and validates an order's body, or answers 400. With
// userOptional, as when a token names the buyer, it may leave user_id out.
// The body names one SKU (sku, quantity) or a cart (items).
func orderRequest(c *gin.Context, userOptional bool) (orderBody, bool) {
	var b orderBody
	if !bindOrder(c, &b) || !optionalID(c, "user_id", b.UserID, userOptional) {
		return b, false
	}
	if b.Items == nil {
		return b, validID(c, "sku", b.SKU) && validQuantity(c, "quantity", b.Quantity)
	}
	if b.SKU != "" || b.Quantity != 0 {
		problem(c, "invalid-request", "give either sku and quantity, or items, not both")
		return b, false
	}
	if len(b.Items) < 1 || len(b.Items) > MaxLines {
		problem(c, "invalid-request", fmt.Sprintf("items must hold 1 to %d lines", MaxLines))
		return b, false
	}
	seen := make(map[string]bool, len(b.Items))
	for i, l := range b.Items {
		if !validID(c, fmt.Sprintf("items[%d].sku", i), l.SKU) || !validQuantity(c, fmt.Sprintf("items[%d].quantity", i), l.Quantity) {
			return b, false
		}
		if seen[l.SKU] {
			problem(c, "invalid-request", fmt.Sprintf("items[%d].sku: %s is in the cart twice; give each SKU once, with its quantity", i, l.SKU))
			return b, false
		}
		seen[l.SKU] = true
	}
	return b, true
}

// validQuantity answers 400 unless q is a quantity of one line.
func validQuantity(c *gin.Context, field string, q int) bool {
	ok := q >= 1 && q <= MaxQuantity
	if !ok {
		problem(c, "invalid-request", fmt.Sprintf("%s must be an integer from 1 to %d", field, MaxQuantity))
	}
	return ok
}

// postOrder places an order, admitting it here: the order service keeps
// its Idempotency-Key, and a request refused as invalid decided nothing,
// and is not kept.
func (a *api) postOrder(c *gin.Context) {
	key, err := idempotency.ParseKey(c.GetHeader(idempotency.Header))
	if err != nil {
		a.fail(c, err)
		return
	}
	b, ok := orderRequest(c, a.Buyers != nil)
	if !ok {
		return
	}
	user, err := a.admit(c, b.UserID)
	if err != nil {
		a.fail(c, err)
		return
	}
	o, replayed, err := a.Orders.Place(c.Request.Context(), order.PlaceRequest{SKU: b.SKU, UserID: user, Quantity: b.Quantity, Items: b.Items, IdempotencyKey: key})
	if replayed {
		c.Header(idempotency.ReplayedHeader, "true") // a kept refusal too
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	c.Header("Location", orderLocation(o.ID))
	writeOrder(c, http.StatusCreated, o)
}

type refundBody struct {
	UserID string `json:"user_id"`
}

func (a *api) refundOrder(c *gin.Context) { a.byBuyer(c, a.Orders.Refund) }

func (a *api) cancelOrder(c *gin.Context) { a.byBuyer(c, a.Orders.Cancel) }

// byBuyer answers a buyer's request to move an order, a refund or a
// cancellation, made by move under the request's Idempotency-Key.
func (a *api) byBuyer(c *gin.Context, move func(ctx context.Context, id int64, user, key string) (order.Order, bool, error)) {
	id, ok := orderID(c)
	var b refundBody
	if !ok || !bind(c, &b) || !optionalID(c, "user_id", b.UserID, a.Buyers != nil) {
		return
	}
	user, err := a.user(c, b.UserID)
	if err != nil {
		a.fail(c, err)
		return
	}
	key, _ := idempotency.ParseKey(c.GetHeader(idempotency.Header))
	o, replayed, err := move(c.Request.Context(), id, user, key)
	if err != nil {
		a.fail(c, err)
		return
	}
	if replayed {
		c.Header(idempotency.ReplayedHeader, "true")
	}
	writeOrder(c, http.StatusOK, o)
}

type payBody struct {
	PaymentID string `json:"payment_id"`
}

// payOrder is the payment provider's callback: signed, not the buyer's.
// Its payment_id is its idempotency key.
func (a *api) payOrder(c *gin.Context) {
	id, ok := orderID(c)
	if !ok {
		return
	}
	body, ok := readBody(c)
	if !ok {
		return
	}
	if err := payment.Verify(a.PaymentSecret, c.GetHeader(payment.Header), body, time.Now()); err != nil {
		c.Header("WWW-Authenticate", `Shop-Signature realm="stockguard-payments"`)
		a.fail(c, err)
		return
	}
	var b payBody
	if !decode(c, body, &b) || !validID(c, "payment_id", b.PaymentID) {
		return
	}
	o, replayed, err := a.Orders.Pay(c.Request.Context(), id, b.PaymentID)
	if replayed {
		c.Header(idempotency.ReplayedHeader, "true")
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	writeOrder(c, http.StatusOK, o)
}
