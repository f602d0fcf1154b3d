package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/buyer"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/jsonenc"
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
	c.Set(problemKey, slug)
	pr := Problem{Type: slug, Title: p.title, Status: p.status, Detail: detail, Instance: c.Request.URL.Path}
	if with != nil {
		with(&pr)
	}
	buf := answers.Get().(*[]byte)
	defer answers.Put(buf)
	*buf = pr.appendJSON((*buf)[:0])
	c.Abort()
	c.Data(p.status, "application/problem+json", *buf)
}

// appendJSON appends p as JSON, byte for byte as encoding/json writes it:
// a refusal, the most common answer of a sale, costs no reflection.
func (p Problem) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = jsonenc.AppendString(b, p.Type)
	b = append(b, `,"title":`...)
	b = jsonenc.AppendString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	if p.Detail != "" {
		b = append(b, `,"detail":`...)
		b = jsonenc.AppendString(b, p.Detail)
	}
	if p.Instance != "" {
		b = append(b, `,"instance":`...)
		b = jsonenc.AppendString(b, p.Instance)
	}
	if len(p.SKUs) > 0 {
		b = append(b, `,"skus":[`...)
		for i, s := range p.SKUs {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, s)
		}
		b = append(b, ']')
	}
	if p.Available != nil {
		b = append(b, `,"available":`...)
		b = strconv.AppendInt(b, int64(*p.Available), 10)
	}
	return append(b, '}')
}

// fail maps an error from the layers below to its problem: the one place
// where domain errors meet HTTP.
func (a *api) fail(c *gin.Context, err error) {
	var limited *buyer.LimitedError
	var notExpected *stock.NotExpectedError
	var short interface{ Short() []string }
	switch {
	case errors.As(err, &short) && errors.Is(err, stock.ErrSoldOut):
		// First: nearly every answer of a sale. The SKUs that were short,
		// a cart's too.
		skus := short.Short()
		problemOf(c, "sold-out", "not enough stock of "+quoted(skus), func(p *Problem) { p.SKUs = skus })
	case errors.Is(err, buyer.ErrUnauthorized):
		problem(c, "unauthorized", reason("missing or bad token", err, buyer.ErrUnauthorized))
	case errors.Is(err, payment.ErrSignature):
		problem(c, "unauthorized", "the Shop-Signature is missing or does not match the body")
	case errors.Is(err, buyer.ErrForbidden):
		problem(c, "forbidden", "the request names another user than its token")
	case errors.As(err, &limited):
		// Whole seconds, rounded up: a client that waits that long is let in.
		wait := strconv.FormatInt(int64(max(limited.RetryAfter, time.Second)+time.Second-1)/int64(time.Second), 10)
		c.Header("Retry-After", wait)
		problem(c, "rate-limited", "too many requests from this buyer: retry after "+wait+"s")
	case errors.Is(err, idempotency.ErrKeyMissing):
		problem(c, "idempotency-key-missing", "the Idempotency-Key header is required")
	case errors.Is(err, idempotency.ErrKeyInvalid):
		problem(c, "invalid-request", "the Idempotency-Key must be 1 to 255 visible ASCII characters, bare or as a quoted string")
	case errors.Is(err, idempotency.ErrInProgress):
		problem(c, "request-in-progress", "retry after the first request with this key has finished")
	case errors.Is(err, idempotency.ErrKeyReused):
		problem(c, "idempotency-key-reused", "this Idempotency-Key was first used for a different request; send a new request with a new key")
	case errors.Is(err, stock.ErrNotFound):
		problem(c, "not-found", fmt.Sprintf("SKU %q does not exist", subject(err, stock.ErrNotFound)))
	case errors.Is(err, order.ErrNotFound):
		problem(c, "not-found", fmt.Sprintf("order %s does not exist", subject(err, order.ErrNotFound)))
	case errors.Is(err, stock.ErrSoldOut):
		skus := []string{subject(err, stock.ErrSoldOut)}
		problemOf(c, "sold-out", "not enough stock of "+quoted(skus), func(p *Problem) { p.SKUs = skus })
	case errors.As(err, &notExpected):
		problemOf(c, "stale", fmt.Sprintf("expected_available is not the current available of %q, which is %d", notExpected.SKU, notExpected.Available),
			func(p *Problem) { p.Available = &notExpected.Available })
	case errors.Is(err, stock.ErrInsufficient):
		problem(c, "insufficient-stock", "the adjustment would take available below 0")
	case errors.Is(err, order.ErrLimitReached):
		problem(c, "limit-reached", "this buyer already holds the most units of this SKU that one user may")
	case errors.Is(err, order.ErrAlreadyRefunded):
		problem(c, "already-refunded", "the order is already refunded")
	case errors.Is(err, order.ErrOrderExpired):
		problem(c, "order-expired", "the order is cancelled or past its payment deadline")
	case errors.Is(err, order.ErrAlreadyPaid):
		problem(c, "already-paid", "the order is already paid")
	case errors.Is(err, order.ErrNotPaid):
		problem(c, "not-paid", "the order is not paid yet: cancel it instead")
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

// subject is what err says after sentinel's text, such as the SKU of
// "stock: sku not found: sku-1"; empty if it says nothing more.
func subject(err, sentinel error) string {
	_, after, _ := strings.Cut(err.Error(), sentinel.Error())
	after, _, _ = strings.Cut(strings.TrimPrefix(after, ": "), ":")
	return strings.TrimSpace(after)
}

// reason is sentence, followed by why, as err says after sentinel's text.
func reason(sentence string, err, sentinel error) string {
	_, after, _ := strings.Cut(err.Error(), sentinel.Error())
	if after = strings.TrimSpace(strings.TrimPrefix(after, ": ")); after != "" {
		return sentence + ": " + after
	}
	return sentence
}

// quoted lists skus, each quoted, comma-separated.
func quoted(skus []string) string {
	q := make([]string, len(skus))
	for i, s := range skus {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
