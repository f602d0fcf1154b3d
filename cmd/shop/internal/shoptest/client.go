package shoptest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Send sends a request with body and the header's name-value pairs, and
// returns the answer's status and body.
func Send(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Reply is one response, decoded enough to classify it.
type Reply struct {
	Code      int
	Replayed  bool
	Wait      time.Duration // as its Retry-After asks, bounded; 0 without one
	Body      string
	ID        int64    `json:"id"`
	Status    any      `json:"status"` // an order's status, or a problem's HTTP status
	Type      string   `json:"type"`
	Detail    string   `json:"detail"`
	SKUs      []string `json:"skus"`      // a sold-out problem's short SKUs
	Available *int     `json:"available"` // a stock's
}

// Post sends a JSON POST with an Idempotency-Key, on a fresh connection so
// that a thousand of them really are concurrent.
func Post(ctx context.Context, client *http.Client, url, key, body string) (Reply, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	r := Reply{Code: resp.StatusCode, Replayed: resp.Header.Get("Idempotent-Replayed") == "true", Wait: RetryAfter(resp.Header), Body: string(data)}
	return r, json.Unmarshal(data, &r)
}

// Heard is what r tells the history.
func (r Reply) Heard() Heard {
	return Heard{Code: r.Code, Type: r.Type, Order: r.ID, Short: r.SKUs, Value: r.Available}
}

// maxRetryAfter bounds how long a client waits before it asks again.
const maxRetryAfter = time.Second

// RetryAfter is the wait an answer's Retry-After asks for, in seconds, at
// most maxRetryAfter; 0 without one.
func RetryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n < 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter)
}

// Scrape reads every series of debug's /metrics.
func Scrape(t *testing.T, debug string) map[string]float64 {
	t.Helper()
	code, body := Send(t, "GET", debug+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	series := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		series[line[:i]] = v
	}
	return series
}
