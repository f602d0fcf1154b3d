package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/stockguard/shop/internal/buyer"
)

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
