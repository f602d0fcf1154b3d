// Package httpapi is the shop's HTTP API: the gin router, its handlers, and
// the mapping of domain errors to RFC 9457 problem+json.
package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
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
	Strategy    string // its name, for the metrics
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
	// keepsKeys: the strategy keeps its buyers' Idempotency-Keys for
	// orders itself, and the key store is for refunds alone.
	keepsKeys bool
}

func init() { gin.SetMode(gin.ReleaseMode) }

// New returns the router.
func New(cfg Config) *gin.Engine {
	a := &api{Config: cfg, keepsKeys: cfg.Orders != nil && cfg.Orders.KeepsKeys()}
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

	// A buyer's order or refund is authenticated, then admitted (its user
	// checked against the token's, then the rate limit), and only then
	// reserved under its Idempotency-Key: a request turned away leaves
	// nothing under its key. A strategy that keeps its keys itself gets
	// its orders admitted by postOrder.
	idem := idempotency.Middleware(idempotency.MiddlewareConfig{Store: a.Idempotency, MaxBody: MaxBodyBytes, Admit: a.admit, Fail: a.fail, Log: a.Log})
	orders := []gin.HandlerFunc{a.countOrders, a.authenticate}
	if !a.keepsKeys {
		orders = append(orders, idem)
	}
	v1 := r.Group("/api/v1", a.timeout)
	v1.PUT("/stock/:sku", a.admin, a.putStock)
	v1.DELETE("/stock/:sku", a.admin, a.deleteStock)
	v1.GET("/stock/:sku", a.getStock)
	v1.POST("/stock/:sku/adjustments", a.admin, a.adjustmentKeys(), a.postAdjustment)
	v1.GET("/stock/:sku/movements", a.admin, a.listMovements)
	v1.POST("/orders", append(orders, a.postOrder)...)
	v1.GET("/orders", a.authenticate, a.listOrders)
	v1.GET("/orders/:id", a.authenticate, a.getOrder)
	v1.POST("/orders/:id/refund", a.authenticate, idem, a.refundOrder)
	v1.POST("/orders/:id/cancel", a.countOrders, a.authenticate, idem, a.cancelOrder)
	v1.POST("/orders/:id/pay", a.countOrders, a.payOrder)
	return r
}

// buyerKey holds, in the gin context, the subject of the request's token.
const buyerKey = "buyer"

// authenticate requires a valid buyer token when buyer authentication is
// on, and keeps its subject for user.
func (a *api) authenticate(c *gin.Context) {
	if a.Buyers == nil {
		return
	}
	sub, err := a.Buyers.Verify(c.GetHeader("Authorization"))
	if err == nil && !ValidID(sub) {
		err = fmt.Errorf("%w: the token's sub must be 1 to %d visible ASCII characters", buyer.ErrUnauthorized, MaxIDLength)
	}
	if err != nil {
		a.fail(c, err)
		return
	}
	c.Set(buyerKey, sub)
}

// user returns whose request this is: the token's subject when buyers are
// authenticated, else the user the request names. A request that names
// another user than its token's is forbidden; one that names none is its
// token's.
func (a *api) user(c *gin.Context, named string) (string, error) {
	if a.Buyers == nil {
		return named, nil
	}
	sub := c.GetString(buyerKey)
	if named != "" && named != sub {
		return "", fmt.Errorf("%w: user_id %q, token for %q", buyer.ErrForbidden, named, sub)
	}
	return sub, nil
}

// admit decides, before an Idempotency-Key is reserved, whose request this
// is and whether the buyer's rate allows it.
func (a *api) admit(c *gin.Context, named string) (string, error) {
	user, err := a.user(c, named)
	if err != nil || user == "" {
		return user, err
	}
	return user, a.Rate.Allow(c.Request.Context(), user)
}

func (a *api) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			a.Log.ErrorContext(c, "panic", slog.Any("value", v), slog.String("path", c.Request.URL.Path))
			problem(c, "internal", "")
		}
	}()
	c.Next()
}

// timeout bounds each API request, so that every wait below it ends.
func (a *api) timeout(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), a.RequestTimeout)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}

func (a *api) ready(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	if err := a.Ready(ctx); err != nil {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "error": err.Error()})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}

func (a *api) admin(c *gin.Context) {
	if a.AdminToken == "" {
		problem(c, "unauthorized", "admin endpoints are disabled: SHOP_ADMIN_TOKEN is not set")
		return
	}
	token, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(a.AdminToken)) != 1 {
		c.Header("WWW-Authenticate", `Bearer realm="stockguard-admin"`)
		problem(c, "unauthorized", "Authorization: Bearer <SHOP_ADMIN_TOKEN> is required")
		return
	}
	c.Next()
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
	if !bind(c, &b) || !optionalID(c, "user_id", b.UserID, userOptional) {
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

// postOrder places an order. Its Idempotency-Key was checked, and the
// request admitted, by the key store's middleware; or here, when the
// strategy keeps its keys itself: then a request refused as invalid
// decided nothing, and is not kept.
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
	admit := a.user
	if a.keepsKeys {
		admit = a.admit
	}
	user, err := admit(c, b.UserID)
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
	c.Header("Location", fmt.Sprintf("/api/v1/orders/%d", o.ID))
	c.JSON(http.StatusCreated, o)
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
	c.JSON(http.StatusOK, o)
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
	c.JSON(http.StatusOK, o)
}

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
	c.JSON(http.StatusOK, o)
}

// bind decodes a JSON body of at most MaxBodyBytes into v, refusing unknown
// fields and trailing data. On failure it writes the problem.
func bind(c *gin.Context, v any) bool {
	body, ok := readBody(c)
	return ok && decode(c, body, v)
}

// readBody reads a body of at most MaxBodyBytes. On failure it writes the
// problem.
func readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return body, true
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The server's read timeout passed before the body arrived: the
		// client is too slow, or holds the connection on purpose.
		problem(c, "request-timeout", "the body did not arrive within the server's read timeout")
	case errors.As(err, &tooBig):
		problem(c, "invalid-request", fmt.Sprintf("the body is larger than %d bytes", MaxBodyBytes))
	default:
		problem(c, "invalid-request", "reading the body: "+err.Error())
	}
	return nil, false
}

// decode decodes body, one JSON object, into v, refusing unknown fields and
// trailing data. On failure it writes the problem.
func decode(c *gin.Context, body []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			return true
		}
		err = errors.New("unexpected data after the JSON object")
	}
	if errors.Is(err, io.EOF) {
		problem(c, "invalid-request", "the body is empty; a JSON object is required")
	} else {
		problem(c, "invalid-request", "malformed JSON: "+err.Error())
	}
	return false
}

// ValidID reports whether v, a SKU or a user, is 1 to MaxIDLength visible
// ASCII characters.
func ValidID(v string) bool {
	ok := v != "" && len(v) <= MaxIDLength
	for i := 0; ok && i < len(v); i++ {
		ok = v[i] > ' ' && v[i] < 0x7f
	}
	return ok
}

// validID answers 400 unless v is a valid ID.
func validID(c *gin.Context, field, v string) bool {
	ok := ValidID(v)
	if !ok {
		problem(c, "invalid-request", fmt.Sprintf("%s must be 1 to %d visible ASCII characters", field, MaxIDLength))
	}
	return ok
}

// optionalID is validID, but with optional an empty v is valid too.
func optionalID(c *gin.Context, field, v string, optional bool) bool {
	return (optional && v == "") || validID(c, field, v)
}
