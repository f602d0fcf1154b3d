package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/buyer"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/order"
	"github.com/stockguard/shop/internal/payment"
	"github.com/stockguard/shop/internal/stock"
)

// Problem is an RFC 9457 problem detail. Type is a stable slug that clients
// can switch on; Title is its fixed human name.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// SKUs are, in a sold-out problem, the SKUs that were short: of a
	// cart, every one of them.
	SKUs []string `json:"skus,omitempty"`
	// Available is, in a stale problem, the SKU's current available.
	Available *int `json:"available,omitempty"`
}

// The problem types, by slug: the table in docs/api.md#errors.
var problems = map[string]struct {
	status int
	title  string
}{
	"invalid-request":         {http.StatusBadRequest, "The request is invalid"},
	"idempotency-key-missing": {http.StatusBadRequest, "Idempotency-Key header is required"},
	"unauthorized":            {http.StatusUnauthorized, "Missing or bad token"},
	"forbidden":               {http.StatusForbidden, "The request is not allowed"},
	"not-found":               {http.StatusNotFound, "Not found"},
	"method-not-allowed":      {http.StatusMethodNotAllowed, "Method not allowed"},
	"request-timeout":         {http.StatusRequestTimeout, "The request did not arrive in time"},
	"sold-out":                {http.StatusConflict, "Not enough stock"},
	"request-in-progress":     {http.StatusConflict, "A request with this Idempotency-Key is in progress"},
	"already-refunded":        {http.StatusConflict, "The order is already refunded"},
	"order-expired":           {http.StatusConflict, "The order is cancelled or past its payment deadline"},
	"already-paid":            {http.StatusConflict, "The order is already paid"},
	"not-paid":                {http.StatusConflict, "The order is not paid yet: cancel it instead"},
	"limit-reached":           {http.StatusConflict, "Per-user limit reached"},
	"stale":                   {http.StatusConflict, "expected_available is not the current available"},
	"insufficient-stock":      {http.StatusConflict, "The adjustment would take available below 0"},
	"idempotency-key-reused":  {http.StatusUnprocessableEntity, "Idempotency-Key reused with a different request"},
	"rate-limited":            {http.StatusTooManyRequests, "Too many requests from this buyer"},
	"busy":                    {http.StatusServiceUnavailable, "Busy, try again"},
	"internal":                {http.StatusInternalServerError, "Internal error"},
}

// unknown is what a busy answer means for the request: it may or may not
// have taken effect (see docs/api.md#idempotency-keys).
const unknown = "the outcome is not known yet; retry with the same Idempotency-Key"

// retryAfter is the Retry-After, in seconds, sent with busy and
// request-in-progress.
const retryAfter = "1"

// problem writes the problem of type slug and aborts the request.
func problem(c *gin.Context, slug, detail string) { problemOf(c, slug, detail, nil) }

// problemOf is problem, with what more its type tells, such as a sold-out
// problem's SKUs, set by with.
func problemOf(c *gin.Context, slug, detail string, with func(*Problem)) {
	p, ok := problems[slug]
	if !ok {
		panic("httpapi: unknown problem type " + slug)
	}
	if slug == "busy" || slug == "request-in-progress" {
		c.Header("Retry-After", retryAfter)
		idempotency.Unsettled(c)
	}
	if slug == "request-timeout" {
		// The connection cannot carry another request: what is left of
		// this one's body is still on its way.
		c.Header("Connection", "close")
	}
	if slug == "unauthorized" && c.Writer.Header().Get("WWW-Authenticate") == "" {
		c.Header("WWW-Authenticate", `Bearer realm="stockguard"`)
	}
	c.Header("Content-Type", "application/problem+json")
	c.Set(problemKey, slug)
	pr := Problem{Type: slug, Title: p.title, Status: p.status, Detail: detail, Instance: c.Request.URL.Path}
	if with != nil {
		with(&pr)
	}
	c.AbortWithStatusJSON(p.status, pr)
}

// fail maps an error from the layers below to its problem: the one place
// where domain errors meet HTTP.
func (a *api) fail(c *gin.Context, err error) {
	var limited *buyer.LimitedError
	var notExpected *stock.NotExpectedError
	switch {
	case errors.Is(err, buyer.ErrUnauthorized), errors.Is(err, payment.ErrSignature):
		problem(c, "unauthorized", err.Error())
	case errors.Is(err, buyer.ErrForbidden):
		problem(c, "forbidden", err.Error())
	case errors.As(err, &limited):
		// Whole seconds, rounded up: a client that waits that long is let in.
		c.Header("Retry-After", strconv.FormatInt(int64(max(limited.RetryAfter, time.Second)+time.Second-1)/int64(time.Second), 10))
		problem(c, "rate-limited", err.Error())
	case errors.Is(err, idempotency.ErrKeyMissing):
		problem(c, "idempotency-key-missing", err.Error())
	case errors.Is(err, idempotency.ErrKeyInvalid):
		problem(c, "invalid-request", err.Error())
	case errors.Is(err, idempotency.ErrInProgress):
		problem(c, "request-in-progress", "retry after the first request with this key has finished")
	case errors.Is(err, idempotency.ErrKeyReused):
		problem(c, "idempotency-key-reused", err.Error())
	case errors.Is(err, stock.ErrNotFound), errors.Is(err, order.ErrNotFound):
		problem(c, "not-found", err.Error())
	case errors.Is(err, stock.ErrSoldOut):
		var short interface{ Short() []string }
		errors.As(err, &short)
		var skus []string
		if short != nil {
			skus = short.Short()
		}
		problemOf(c, "sold-out", err.Error(), func(p *Problem) { p.SKUs = skus })
	case errors.As(err, &notExpected):
		problemOf(c, "stale", err.Error(), func(p *Problem) { p.Available = &notExpected.Available })
	case errors.Is(err, stock.ErrInsufficient):
		problem(c, "insufficient-stock", err.Error())
	case errors.Is(err, order.ErrLimitReached):
		problem(c, "limit-reached", err.Error())
	case errors.Is(err, order.ErrAlreadyRefunded):
		problem(c, "already-refunded", err.Error())
	case errors.Is(err, order.ErrOrderExpired):
		problem(c, "order-expired", err.Error())
	case errors.Is(err, order.ErrAlreadyPaid):
		problem(c, "already-paid", err.Error())
	case errors.Is(err, order.ErrNotPaid):
		problem(c, "not-paid", err.Error())
	case errors.Is(err, stock.ErrBusy), errors.Is(err, stock.ErrFenced), errors.Is(err, context.DeadlineExceeded):
		problem(c, "busy", "the stock is contended: "+unknown)
	case backend.Unavailable(err):
		a.Log.WarnContext(c, "a server is unavailable", slog.String("path", c.FullPath()), slog.Any("err", err))
		problem(c, "busy", "a server the shop depends on is unavailable: "+unknown)
	default:
		a.Log.ErrorContext(c, "request failed", slog.String("path", c.FullPath()), slog.Any("err", err))
		problem(c, "internal", "")
	}
}
