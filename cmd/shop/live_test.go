package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stockguard/shop/cmd/shop/internal/live"
	"github.com/stockguard/shop/internal/testinfra"
	"github.com/stockguard/shop/loadtest"
)

// liveStrategies run in the live view's tests: none oversells, so its
// counter must turn red; the others must stay at 0.
var liveStrategies = []string{"none", "atomic", "lua"}

// liveDemo is `shop demo --serve` on the embedded backends, small enough
// to run in seconds.
type liveDemo struct {
	url    string // the live view's
	report string // the demo's --json file, written before the view hears the end
}

// startLiveDemo starts the demo and returns once the live view listens. The
// demo serves until the test ends.
func startLiveDemo(t *testing.T) *liveDemo {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	d := &liveDemo{report: filepath.Join(t.TempDir(), "report.json")}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"demo", "--serve", "127.0.0.1:0", "--strategies", strings.Join(liveStrategies, ","),
			"--buyers", "300", "--stock", "30", "--instances", "2", "--json", d.report},
			func(string) string { return "" }, io.Discard, pw)
		pw.Close()
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shop demo: %v", err)
		}
	})
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if url, ok := strings.CutPrefix(sc.Text(), "live view: http"); ok {
			d.url = "http" + url
			break
		}
	}
	if d.url == "" {
		t.Fatal("shop demo printed no live view address")
	}
	go io.Copy(io.Discard, pr)
	return d
}

// audited reads the demo's report: what the database said of each burst.
func (d *liveDemo) audited(t *testing.T) map[string]*loadtest.Phase {
	t.Helper()
	b, err := os.ReadFile(d.report)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadtest.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	bursts := map[string]*loadtest.Phase{}
	for _, r := range rep.Results {
		if r.Burst == nil {
			t.Fatalf("%s: no burst in the report: %s", r.Strategy, r.Error)
		}
		bursts[r.Strategy] = r.Burst
	}
	return bursts
}

// TestLiveView follows the live view's event stream through a demo, as the
// page does, and checks that its last state is what the database said:
// orders, oversold and stock left of every burst, and the answers.
func TestLiveView(t *testing.T) {
	t.Parallel()
	untilNoneOversells(t, "the demo shows nothing to turn red", followLiveView)
}

// untilNoneOversells runs check, a demo followed through the live view that
// returns none's oversold units, until none oversold. none's oversell is a
// race: on a starved machine its buyers may happen to come one at a time,
// and then the view has nothing to turn red. Every run's other checks
// count.
func untilNoneOversells(t *testing.T, why string, check func(*testing.T) int) {
	for run := 1; ; run++ {
		if check(t) > 0 {
			return
		}
		if run == 3 {
			t.Errorf("none did not oversell in %d runs: %s", run, why)
			return
		}
		t.Logf("run %d: none did not oversell; running the demo again", run)
	}
}

func followLiveView(t *testing.T) int {
	d := startLiveDemo(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var state live.State
	events := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for !state.Done && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		events++
		state = live.State{}
		if err := json.Unmarshal([]byte(data), &state); err != nil {
			t.Fatalf("event %d: %v", events, err)
		}
	}
	if !state.Done {
		t.Fatalf("the stream ended before the run did (%d events): %v", events, sc.Err())
	}
	if events < 3 {
		t.Errorf("%d events for a whole run: the view did not follow it", events)
	}
	bursts := d.audited(t)
	if len(state.Phases) != len(liveStrategies) {
		t.Fatalf("%d phases in the view, want %d", len(state.Phases), len(liveStrategies))
	}
	for _, p := range state.Phases {
		want := bursts[p.Strategy]
		if want == nil || p.Kind != "burst" || p.Audit == nil {
			t.Errorf("%s %s: not in the report, or not audited: %+v", p.Strategy, p.Kind, p)
			continue
		}
		a := want.Audit
		got := [...]int{p.Audit.Orders, p.Audit.Oversold, p.Audit.Available, p.Answers["ordered"], p.Answers["sold-out"]}
		if got != [...]int{a.Orders, a.Oversold, a.Available, want.Ordered, want.SoldOut} {
			t.Errorf("%s: the view shows orders, oversold, left, 201s, sold-outs %v; the report %v", p.Strategy, got,
				[...]int{a.Orders, a.Oversold, a.Available, want.Ordered, want.SoldOut})
		}
		if n := len(p.Series); n < 2 || p.Series[n-1][1] != float64(want.Ordered) {
			t.Errorf("%s: the series ends at %v, want %d orders", p.Strategy, p.Series[n-1], want.Ordered)
		}
	}
	return bursts["none"].Audit.Oversold
}

// TestLiveViewInChromium opens the page in headless Chromium before the
// sale starts and reads, once the run has ended, the numbers the page
// shows: they must be the audit's, and none's oversold counter red.
func TestLiveViewInChromium(t *testing.T) {
	t.Parallel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(testinfra.Chromium(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000))
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil { // the browser is up before the sale
		t.Fatal(err)
	}
	untilNoneOversells(t, "the page had nothing to turn red", func(t *testing.T) int { return readLivePage(t, ctx) })
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the page did not finish in time")
	}
}

// readLivePage opens the live view of a new demo and checks, once the run
// has ended, the numbers it shows against the audit. It returns none's
// oversold units.
func readLivePage(t *testing.T, ctx context.Context) int {
	d := startLiveDemo(t)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(d.url)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitVisible(`[data-testid="status"][data-done="true"]`)); err != nil {
		t.Fatalf("the page never showed the run's end: %v", err)
	}
	bursts := d.audited(t)
	for _, s := range liveStrategies {
		a := bursts[s].Audit
		sel := func(f string) string { return fmt.Sprintf(`[data-testid="%s-%s-burst"]`, f, s) }
		var shown [3]string
		for i, f := range []string{"orders", "oversold", "left"} {
			var err error
			if shown[i], err = chromedp.Run(ctx, chromedp.Text(sel(f))); err != nil {
				t.Fatalf("%s %s: %v", s, f, err)
			}
		}
		attr, err := chromedp.Run(ctx, chromedp.AttributeValue(sel("oversold"), "class"))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		class := attr.Value
		if want := [...]string{fmt.Sprint(a.Orders), fmt.Sprint(a.Oversold), fmt.Sprint(a.Available)}; shown != want {
			t.Errorf("%s: the page shows orders, oversold, left %q; the audit %q", s, shown, want)
		}
		if red := strings.Contains(class, "bad"); red != (a.Oversold > 0) {
			t.Errorf("%s: oversold %d, and its counter's class is %q", s, a.Oversold, class)
		}
	}
	return bursts["none"].Audit.Oversold
}
