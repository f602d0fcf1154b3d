package buyer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/metrics"
)

// Limiter is a per-buyer rate limit, GCRA in Redis (go-redis/redis_rate),
// so that every instance on the same Redis shares each buyer's allowance.
type Limiter struct {
	limiter *redis_rate.Limiter
	limit   redis_rate.Limit
	prefix  string
	log     *slog.Logger
}

// NewLimiter allows each buyer n requests per period, and a burst of n.
// Keys are "rate:" (the library's own prefix), then prefix, then
// "buyer:" and the buyer; each expires once its buyer's allowance is whole
// again.
func NewLimiter(rdb redis.UniversalClient, n int, period time.Duration, prefix string, log *slog.Logger) *Limiter {
	return &Limiter{
		limiter: redis_rate.NewLimiter(rdb),
		limit:   redis_rate.Limit{Rate: n, Burst: n, Period: period},
		prefix:  prefix + "buyer:",
		log:     log,
	}
}

// LimitedError is ErrRateLimited with the time after which the buyer may
// ask again.
type LimitedError struct{ RetryAfter time.Duration }

func (e *LimitedError) Error() string {
	return fmt.Sprintf("%v: retry after %s", ErrRateLimited, e.RetryAfter.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrRateLimited) hold.
func (e *LimitedError) Is(target error) bool { return target == ErrRateLimited }

// Allow takes one request from the buyer's allowance. It returns a
// *LimitedError when there is none left. A nil Limiter allows everything.
//
// When Redis fails, Allow lets the request through, logs it and counts it
// in metrics.RateFailedOpen: a limit that stopped every buyer whenever Redis hiccups
// would do more harm than the bots it holds off. The order path still
// guards the stock and the per-user limit in the database.
func (l *Limiter) Allow(ctx context.Context, buyer string) error {
	if l == nil {
		return nil
	}
	res, err := l.limiter.Allow(ctx, l.prefix+buyer, l.limit)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		metrics.RateFailedOpen.Inc()
		l.log.WarnContext(ctx, "rate limit unavailable; letting the request through", slog.String("buyer", buyer), slog.Any("err", err))
		return nil
	case res.Allowed == 0:
		return &LimitedError{RetryAfter: res.RetryAfter}
	}
	return nil
}
