package window

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
)

// How the payment window tests find the shop that runs a job, and kill or
// pause it mid-run.

// metric reads one series of o's metrics, with a bound: a paused shop
// does not answer.
func (w *windowSale) metric(o *shoptest.Shop, series string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", o.Debug+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return f, err
		}
	}
	return 0, fmt.Errorf("%s: no series %s", o.Debug, series)
}

// owner reads the owner of the job's lock in Redis, "" when nobody holds
// it: a random token per acquisition.
func (w *windowSale) owner(t *testing.T, job string) string {
	owner, _ := w.RDB.Get(t.Context(), w.Prefix+"lock:{"+jobKey(job)+"}").Result()
	return owner
}

// caught freezes (SIGSTOP) the shop that runs the job, mid-run, and
// returns it: the shop said it ran the job, and the job's lock had one
// owner from before it said so until it was frozen, so the frozen run
// holds it. A run that ends before the SIGSTOP lands is let go, and the
// next one caught. It tries for 30 seconds.
func (w *windowSale) caught(t *testing.T, job string) *shoptest.Shop {
	t.Helper()
	series := fmt.Sprintf(`shop_job_running{job=%q}`, job)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		before := w.owner(t, job)
		up := w.up()
		states := make([]float64, len(up))
		var wg sync.WaitGroup
		for i, o := range up {
			wg.Go(func() { states[i], _ = w.metric(o, series) })
		}
		wg.Wait()
		i := slices.Index(states, 1)
		if i < 0 || before == "" {
			continue
		}
		o := up[i]
		w.setDown(o, true)
		if !o.Pause(t) {
			return nil
		}
		if w.owner(t, job) == before {
			return o
		}
		w.resume(t, o)
	}
	t.Errorf("no shop was caught running the job %s within 30s", job)
	return nil
}

// resume resumes (SIGCONT) a paused shop.
func (w *windowSale) resume(t *testing.T, o *shoptest.Shop) {
	if err := o.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Error(err)
	}
	w.setDown(o, false)
}

// kill kills (SIGKILL) o.
func (w *windowSale) kill(t *testing.T, o *shoptest.Shop) {
	w.setDown(o, true)
	if err := o.Cmd.Process.Kill(); err != nil {
		t.Error(err)
	}
	o.Cmd.Wait()
}

// pauseRunner pauses the shop that runs the expiry job mid-run, past its
// lease, until another shop has taken the job's lock, and at least three
// lock TTLs; then it resumes it, and the paused run learns that its lease
// was lost.
func (w *windowSale) pauseRunner(t *testing.T) {
	const job = "expiry"
	// The lock's count of its acquisitions, its fencing token.
	acquisitions := func() int64 {
		n, _ := w.RDB.Get(t.Context(), w.Prefix+"lock:{"+jobKey(job)+"}:fence").Int64()
		return n
	}
	o := w.caught(t, job)
	if o == nil {
		return
	}
	paused, at := time.Now(), acquisitions()
	for time.Since(paused) < 3*jobTTL || acquisitions() == at {
		if time.Since(paused) > time.Minute {
			t.Error("no other shop took the expiry job over within a minute of its runner's pause")
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.resume(t, o)
	lost := fmt.Sprintf(`shop_job_runs_total{job=%q,result="lost"}`, job)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if v, err := w.metric(o, lost); err == nil && v >= 1 {
			t.Logf("paused the expiry job's runner %s mid-run for %v, until another shop took the job over", o.Base, time.Since(paused).Round(time.Millisecond))
			return
		}
	}
	t.Error("the paused run of the expiry job, resumed, did not learn that its lease was lost")
}
