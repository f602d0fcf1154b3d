package logrepeat_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/logrepeat"
)

// A failure that repeats is logged once, then once per interval with the
// count of the occurrences left out; another failure is logged apart.
func TestSuppressor(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	s := &logrepeat.Suppressor{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Every: 10 * time.Second, Now: func() time.Time { return now }}
	// Redis down for 25s, a failure every 250ms, as the jobs see it.
	for range 100 {
		s.Log(t.Context(), slog.LevelWarn, "relay", "job failed", slog.String("job", "relay"))
		now = now.Add(250 * time.Millisecond)
	}
	s.Log(t.Context(), slog.LevelWarn, "expiry", "job failed", slog.String("job", "expiry"))
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		lines = append(lines, m)
	}
	// At 0s the first, at 10s and 20s one line each for the 39 left out
	// between, then expiry's first.
	want := []struct {
		job      string
		repeated float64
	}{{"relay", 0}, {"relay", 39}, {"relay", 39}, {"expiry", 0}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if lines[i]["job"] != w.job || (lines[i]["repeated"] == nil) != (w.repeated == 0) || (w.repeated > 0 && lines[i]["repeated"] != w.repeated) {
			t.Errorf("line %d: %v, want job %s repeated %v", i, lines[i], w.job, w.repeated)
		}
	}
}

// go-redis's lines come out as JSON, through slog, and repeat at most once
// per interval.
func TestRedisLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var d logrepeat.Drivers
	d.Use(slog.New(slog.NewJSONHandler(&buf, nil)))
	r := logrepeat.Redis{D: &d}
	for range 5 {
		r.Printf(t.Context(), "redis: connection pool: failed to dial after %d attempts: %v\n", 5, "dial tcp 127.0.0.1:1: connection refused")
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON line: %v\n%s", err, buf.String())
	}
	if m["level"] != "WARN" || m["msg"] != "redis client" || m["detail"] != "redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:1: connection refused" {
		t.Errorf("line: %v", m)
	}
}

// The MySQL driver's lines come out as JSON too, a line the driver prints
// once per dead connection at most once per interval.
func TestMySQLLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var d logrepeat.Drivers
	d.Use(slog.New(slog.NewJSONHandler(&buf, nil)))
	m := logrepeat.MySQL{D: &d}
	for range 5 {
		m.Print("packets.go:58 ", io.ErrUnexpectedEOF) // as the driver calls it
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %v\n%s", err, buf.String())
	}
	if line["level"] != "WARN" || line["msg"] != "mysql driver" || line["detail"] != "packets.go:58 unexpected EOF" {
		t.Errorf("line: %v", line)
	}
}
