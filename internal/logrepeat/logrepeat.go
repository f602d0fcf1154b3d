// Package logrepeat keeps a failure that repeats from flooding the log: its
// first occurrence is logged, then at most one line per interval, which
// counts the occurrences left out since the last line. It also routes
// go-redis's and the MySQL driver's own log lines through slog, so that
// a JSON log stays JSON.
package logrepeat

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Every is how often a repeating failure is logged at most, by default.
const Every = 10 * time.Second

// Suppressor logs the occurrences of each kind of failure, by key: the
// first one, then one line per interval with a count of the occurrences
// left out. It keeps no goroutine: the count of the last occurrences
// goes out with the next line, an interval or more later.
type Suppressor struct {
	Logger *slog.Logger     // nil means slog.Default()
	Every  time.Duration    // 0 means Every
	Now    func() time.Time // nil means time.Now

	mu   sync.Mutex
	seen map[string]*seen
}

type seen struct {
	last    time.Time // when its last line was logged
	skipped int       // occurrences since, not logged
}

// Log logs msg at level with attrs, as an occurrence of the failure key,
// unless the failure's last line was logged less than an interval ago:
// then it only counts it. A line after left-out occurrences carries their
// count as "repeated".
func (s *Suppressor) Log(ctx context.Context, level slog.Level, key, msg string, attrs ...slog.Attr) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	every := Every
	if s.Every > 0 {
		every = s.Every
	}
	t := now()
	s.mu.Lock()
	if s.seen == nil {
		s.seen = map[string]*seen{}
	}
	e, ok := s.seen[key]
	if ok && t.Sub(e.last) < every {
		e.skipped++
		s.mu.Unlock()
		return
	}
	skipped := 0
	if ok {
		skipped = e.skipped
	}
	s.seen[key] = &seen{last: t}
	s.mu.Unlock()
	if skipped > 0 {
		attrs = append(attrs, slog.Int("repeated", skipped), slog.Duration("within", t.Sub(e.last)))
	}
	logger := s.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.LogAttrs(ctx, level, msg, attrs...)
}

// Drivers is where go-redis's and the MySQL driver's own lines go. Their
// loggers are process globals, which the drivers read without a lock:
// set them once, before any connection exists, to Redis{d} and MySQL{d},
// and point d at a log with Use whenever. Until then the lines go to
// slog.Default.
type Drivers struct{ s atomic.Pointer[Suppressor] }

// Use sends the drivers' lines to log from now on.
func (d *Drivers) Use(log *slog.Logger) { d.s.Store(&Suppressor{Logger: log}) }

// byDefault takes the drivers' lines before any Use.
var byDefault Suppressor

func (d *Drivers) log(ctx context.Context, key, msg string, attrs ...slog.Attr) {
	s := d.s.Load()
	if s == nil {
		s = &byDefault
	}
	s.Log(ctx, slog.LevelWarn, key, msg, attrs...)
}

// Redis is go-redis's logger (redis.SetLogger), writing each line as a
// warning, a repeated line at most once per interval.
type Redis struct{ D *Drivers }

// Printf logs one line of go-redis's, keyed by its format.
func (r Redis) Printf(ctx context.Context, format string, v ...any) {
	r.D.log(ctx, "redis: "+format, "redis client", slog.String("detail", strings.TrimSpace(fmt.Sprintf(format, v...))))
}

// MySQL is the MySQL driver's logger (mysql.SetLogger), writing each line
// as a warning, a repeated line at most once per interval: a server that
// dies under a pool of connections makes the driver print one "unexpected
// EOF" line per connection.
type MySQL struct{ D *Drivers }

// Print logs one line of the driver's, keyed by its text.
func (m MySQL) Print(v ...any) {
	detail := strings.TrimSpace(fmt.Sprint(v...))
	m.D.log(context.Background(), "mysql: "+detail, "mysql driver", slog.String("detail", detail))
}
