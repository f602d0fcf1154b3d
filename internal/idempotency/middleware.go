package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/stockguard/shop/internal/metrics"
)

// ReplayedHeader marks a response that repeats an earlier one.
const ReplayedHeader = "Idempotent-Replayed"

// MiddlewareConfig configures Middleware.
type MiddlewareConfig struct {
	Store *Store
	// MaxBody is the largest body fingerprinted; a larger one is left to the
	// handler to refuse.
	MaxBody int64
	// Admit, if set, says whose request this is, given the user_id the body
	// names ("" for none), before anything is reserved under the key. Its
	// error ends the request, written by Fail, with nothing stored. Without
	// Admit, the user is the one the body names.
	Admit func(c *gin.Context, named string) (user string, err error)
	// Fail writes the response for ErrKeyMissing, ErrKeyInvalid,
	// ErrInProgress and ErrKeyReused, and for Admit's errors.
	Fail func(*gin.Context, error)
	Log  *slog.Logger
}

// Middleware requires an Idempotency-Key on the route and answers a repeat
// of a request with the first response. The request body must be a JSON
// object; keys are scoped per route and per user, the body's "user_id" or
// the one Admit says. A request with no user is left to the handler.
//
// Only final answers are stored: 2xx and 4xx, unless the handler marked
// its answer Unsettled. A 5xx (such as 503 busy) does not tell its outcome,
// so its key is released for a retry, which finds out. When Redis fails, the
// request goes on without it: the database, which keeps the key with what
// the request changed, still keeps it from acting twice.
func Middleware(cfg MiddlewareConfig) gin.HandlerFunc {
	return func(c *gin.Context) {
		key, err := ParseKey(c.GetHeader(Header))
		if err != nil {
			cfg.Fail(c, err)
			return
		}
		body, err := io.ReadAll(io.LimitReader(c.Request.Body, cfg.MaxBody+1))
		// The handler reads the same stream, and the same error if the read
		// failed, such as the server's read timeout, and refuses it, as it
		// refuses what is malformed.
		var rest io.Reader = c.Request.Body
		if err != nil {
			rest = failedRead{err}
		}
		c.Request.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), rest), c.Request.Body}
		if err != nil || int64(len(body)) > cfg.MaxBody {
			c.Next()
			return
		}
		user, fp, ok := Fingerprint(c.Request.Method, c.Request.URL.Path, body)
		if !ok {
			c.Next()
			return
		}
		if cfg.Admit != nil {
			if user, err = cfg.Admit(c, user); err != nil {
				cfg.Fail(c, err)
				return
			}
		}
		if user == "" {
			c.Next()
			return
		}

		claim, stored, err := cfg.Store.Begin(c.Request.Context(), Scope{UserID: user, Endpoint: c.FullPath(), Key: key}, fp)
		switch {
		case errors.Is(err, ErrInProgress):
			metrics.Idempotency.WithLabelValues("in-progress").Inc()
			cfg.Fail(c, err)
			return
		case errors.Is(err, ErrKeyReused):
			metrics.Idempotency.WithLabelValues("key-reused").Inc()
			cfg.Fail(c, err)
			return
		case err != nil:
			metrics.Idempotency.WithLabelValues("store-unavailable").Inc()
			cfg.Log.WarnContext(c, "idempotency store unavailable; relying on the database", slog.Any("err", err))
			c.Next()
			return
		case stored != nil:
			metrics.Idempotency.WithLabelValues("replayed").Inc()
			replay(c, stored)
			return
		}

		serveAndSettle(c, cfg, claim, fp)
	}
}

// serveAndSettle runs the handler, recording its answer, and settles the
// claim with it: completed with a final answer, abandoned otherwise.
func serveAndSettle(c *gin.Context, cfg MiddlewareConfig, claim *Claim, fp string) {
	rec := &recorder{ResponseWriter: c.Writer}
	c.Writer = rec
	c.Next()

	// The request's own ctx may have ended; the claim must still be
	// settled.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 2*time.Second)
	defer cancel()
	var err error
	if status := rec.Status(); status >= 500 || c.GetBool(unsettledKey) {
		err = cfg.Store.Abandon(ctx, claim)
	} else {
		err = cfg.Store.Complete(ctx, claim, fp, Response{
			Status:      status,
			ContentType: rec.Header().Get("Content-Type"),
			Location:    rec.Header().Get("Location"),
			Body:        rec.body.Bytes(),
		})
	}
	if err != nil {
		cfg.Log.WarnContext(c, "idempotency record not settled; it expires on its own", slog.Any("err", err))
	}
}

// unsettledKey marks, in the gin context, an answer that is not final.
const unsettledKey = "idempotency.unsettled"

// Unsettled marks the request's answer as not final, such as a 409 that
// says the key's first attempt is still being carried out: it is not
// stored, so that a retry with the key asks again.
func Unsettled(c *gin.Context) { c.Set(unsettledKey, true) }

// failedRead is the rest of a body whose read failed: the same error again.
type failedRead struct{ err error }

func (r failedRead) Read([]byte) (int, error) { return 0, r.err }

func replay(c *gin.Context, r *Response) {
	if r.Location != "" {
		c.Header("Location", r.Location)
	}
	c.Header(ReplayedHeader, "true")
	c.Data(r.Status, r.ContentType, r.Body)
	c.Abort()
}

// recorder keeps a copy of the response body.
type recorder struct {
	gin.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (r *recorder) WriteString(s string) (int, error) {
	r.body.WriteString(s)
	return r.ResponseWriter.WriteString(s)
}

// Fingerprint hashes the canonical form of a request: method, path, user and
// the body's fields, whatever their order or spacing. user is the body's
// user_id, "" when it has none. ok is false when the body is not a JSON
// object, or its user_id is not a string.
func Fingerprint(method, path string, body []byte) (user, fp string, ok bool) {
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&fields) != nil {
		return "", "", false
	}
	if v, named := fields["user_id"]; named {
		if user, ok = v.(string); !ok {
			return "", "", false
		}
	}
	canonical, err := json.Marshal(fields) // map keys come out sorted
	if err != nil {
		return "", "", false
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(method), []byte(path), canonical} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return user, hex.EncodeToString(h.Sum(nil)), true
}
