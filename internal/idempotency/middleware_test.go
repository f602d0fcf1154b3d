package idempotency_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/stockguard/shop/internal/idempotency"
)

// TestMiddlewareKeepsFinalAnswers: a final answer, 2xx or 4xx, is stored
// and replayed; a 5xx, or a 4xx the handler marks Unsettled (such as a
// 409 that says the key's first attempt is still being carried out), is
// not, and the retry with the same key reaches the handler again.
func TestMiddlewareKeepsFinalAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		status    int
		unsettled bool
		calls     int // the handler's, after two requests with one key
	}{
		{"refunded", http.StatusOK, false, 1},
		{"already refunded", http.StatusConflict, false, 1},
		{"busy", http.StatusServiceUnavailable, false, 2},
		{"in progress", http.StatusConflict, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			r := gin.New()
			r.POST("/orders/:id/refund", idempotency.Middleware(idempotency.MiddlewareConfig{
				Store: newStore(t, idempotency.Options{}), MaxBody: 1 << 10,
				Fail: func(c *gin.Context, err error) { c.AbortWithStatus(http.StatusTeapot) },
				Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
			}), func(c *gin.Context) {
				calls++
				if tc.unsettled {
					idempotency.Unsettled(c)
				}
				c.JSON(tc.status, gin.H{"call": calls})
			})
			for range 2 {
				req := httptest.NewRequest("POST", "/orders/1/refund", strings.NewReader(`{"user_id":"ann"}`))
				req.Header.Set(idempotency.Header, "k")
				w := httptest.NewRecorder()
				r.ServeHTTP(w, req)
				if w.Code != tc.status {
					t.Fatalf("answered %d %s, want %d", w.Code, w.Body, tc.status)
				}
			}
			if calls != tc.calls {
				t.Errorf("the handler ran %d times for two requests with one key, want %d", calls, tc.calls)
			}
		})
	}
}
