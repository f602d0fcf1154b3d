// Package live serves the live view of a demo or bench run: a page that
// shows each strategy's sale as it runs, kept up to date with Server-Sent
// Events. The page and its script are embedded; it needs no network.
package live

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/stockguard/shop/loadtest"
)

//go:embed page
var page embed.FS

// tick is how often the page hears the state while it changes: often
// enough to watch, far from one event per request.
const tick = 250 * time.Millisecond

// maxPoints bounds a phase's series; a longer phase keeps every other
// point, so its whole length still shows.
const maxPoints = 240

// View hears a run as a sale.Progress and serves it. The zero value is not
// ready: use New.
type View struct {
	mu      sync.Mutex
	state   State
	version int           // bumped by every change
	changed chan struct{} // closed and replaced on every change
}

// State is what the page shows, sent whole in every event.
type State struct {
	// Now is what runs, as the progress bar describes it; Done is set once
	// the run has ended.
	Now    string   `json:"now"`
	Done   bool     `json:"done"`
	Phases []*Phase `json:"phases"`
}

// Phase is one phase of one strategy.
type Phase struct {
	Strategy string `json:"strategy"`
	Kind     string `json:"kind"` // burst, steady or closed
	Stock    int    `json:"stock"`
	// Answers counts the answers so far by outcome, as loadtest names
	// them.
	Answers map[string]int `json:"answers"`
	// Series is [seconds since the phase started, 201s so far] pairs.
	Series [][2]float64 `json:"series"`
	// Latency counts answers by latency bucket: bucket i holds those under
	// LatencyBounds[i] milliseconds, the last one the rest.
	Latency []int `json:"latency"`
	// Audit is what the database says once the phase has ended.
	Audit *Audit `json:"audit,omitempty"`

	started time.Time
	every   time.Duration // between series points
	last    time.Time
}

// Audit is the database's word on a phase.
type Audit struct {
	Orders    int      `json:"orders"`
	Sold      int      `json:"sold"`
	Available int      `json:"available"`
	Oversold  int      `json:"oversold"`
	Undersold int      `json:"undersold"`
	Problems  []string `json:"problems,omitempty"`
}

// LatencyBounds are the upper bounds, in milliseconds, of the latency
// buckets.
var LatencyBounds = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}

// New returns an empty view.
func New() *View {
	return &View{changed: make(chan struct{}), state: State{Phases: []*Phase{}}}
}

// change runs fn under the lock and wakes the event streams.
func (v *View) change(fn func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fn()
	v.version++
	close(v.changed)
	v.changed = make(chan struct{})
}

// Begin implements sale.Progress.
func (v *View) Begin(int) {}

// Describe implements sale.Progress.
func (v *View) Describe(what string) { v.change(func() { v.state.Now = what }) }

// Start implements sale.Progress.
func (v *View) Start(strategy, kind string, stock int) {
	now := time.Now()
	v.change(func() {
		v.state.Phases = append(v.state.Phases, &Phase{Strategy: strategy, Kind: kind, Stock: stock,
			Answers: map[string]int{}, Series: [][2]float64{{0, 0}}, Latency: make([]int, len(LatencyBounds)+1),
			started: now, every: tick / 5, last: now})
	})
}

// Add implements sale.Progress.
func (v *View) Add(a loadtest.Answer) {
	v.change(func() {
		p := v.current()
		if p == nil {
			return
		}
		p.Answers[a.Outcome.String()]++
		ms := float64(a.Latency) / float64(time.Millisecond)
		i := 0
		for i < len(LatencyBounds) && ms >= LatencyBounds[i] {
			i++
		}
		p.Latency[i]++
		if now := time.Now(); now.Sub(p.last) >= p.every {
			p.point(now)
		}
	})
}

// Audited implements sale.Progress.
func (v *View) Audited(strategy, kind string, ph *loadtest.Phase) {
	v.change(func() {
		p := v.current()
		if p == nil || p.Strategy != strategy || p.Kind != kind {
			return
		}
		p.point(time.Now())
		a := ph.Audit
		p.Audit = &Audit{Orders: a.Orders, Sold: a.Sold, Available: a.Available, Oversold: a.Oversold,
			Undersold: a.Undersold, Problems: ph.Problems}
	})
}

// Finish marks the run as ended.
func (v *View) Finish() { v.change(func() { v.state.Done, v.state.Now = true, "" }) }

func (v *View) current() *Phase {
	if n := len(v.state.Phases); n > 0 {
		return v.state.Phases[n-1]
	}
	return nil
}

// point adds the 201s so far to the series, thinning it past maxPoints.
func (p *Phase) point(now time.Time) {
	p.last = now
	p.Series = append(p.Series, [2]float64{now.Sub(p.started).Seconds(), float64(p.Answers[loadtest.Ordered.String()])})
	if len(p.Series) > maxPoints {
		thin := p.Series[:0]
		for i, pt := range p.Series {
			if i%2 == 0 || i == len(p.Series)-1 {
				thin = append(thin, pt)
			}
		}
		p.Series = thin
		p.every *= 2
	}
}

// snapshot returns the state as JSON, and its version.
func (v *View) snapshot() ([]byte, int, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	b, _ := json.Marshal(v.state) // plain data: cannot fail
	return b, v.version, v.changed
}

// Handler serves the page at / and its events at /events.
func (v *View) Handler() http.Handler {
	mux := http.NewServeMux()
	files, _ := fs.Sub(page, "page") // the directory is embedded
	mux.Handle("GET /", http.FileServerFS(files))
	mux.HandleFunc("GET /events", v.events)
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, _ *http.Request) {
		b, _, _ := v.snapshot()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	return mux
}

// events streams the state: at once, then at most every tick while it
// changes, until the client goes.
func (v *View) events(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	rc := http.NewResponseController(w)
	sent := -1
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		b, version, changed := v.snapshot()
		if version != sent {
			if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			sent = version
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		}
		select { // throttle: one event per tick at most
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}
