package loadtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/loadtest"
)

// TestSurgeIsAnOpenLoop: every arrival is sent at its time whatever the
// answers before it. The stand-in shop holds the first request until every
// other one has been answered; a load that waited for an answer before
// sending the next would never get there.
func TestSurgeIsAnOpenLoop(t *testing.T) {
	t.Parallel()
	const arrivals = 40
	stub, shop := newStub(t, 4)
	var answered atomic.Int64
	release := make(chan struct{})
	stub.stall = func(n int) {
		if n == 0 {
			<-release
			return
		}
		if answered.Add(1) == arrivals-1 {
			close(release)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // only bounds a hang
	defer cancel()
	stats, err := loadtest.Surge{Rate: 200, Duration: 200 * time.Millisecond}.Run(ctx, shop, "phone", nil)
	if err != nil {
		t.Fatalf("%v: the held request was not released, so the others were not all sent while it was held", err)
	}
	s := stats.Surge
	if stats.Requests != arrivals || s.Outcomes.Total() != arrivals || s.Outcomes.Ordered != 4 || s.Outcomes.SoldOut != arrivals-4 {
		t.Errorf("requests %d, outcomes %+v; want %d answers, 4 ordered and the rest sold out", stats.Requests, s.Outcomes, arrivals)
	}
	if len(stub.users) != arrivals || len(stub.keys) != arrivals {
		t.Errorf("%d distinct users and %d distinct Idempotency-Keys for %d arrivals", len(stub.users), len(stub.keys), arrivals)
	}
	if s.InFlightPeak < 2 || s.CapWaits != 0 || s.Stock != 4 || s.Arrivals != arrivals {
		t.Errorf("in flight at peak %d, cap waits %d, stock %d, arrivals %d; want several in flight, no cap wait, 4 units, %d arrivals",
			s.InFlightPeak, s.CapWaits, s.Stock, s.Arrivals, arrivals)
	}
}

// TestSurgeReportsItsCap: an arrival that finds the cap on requests in
// flight reached waits, and the surge says how many did.
func TestSurgeReportsItsCap(t *testing.T) {
	t.Parallel()
	stub, shop := newStub(t, 100)
	stub.stall = func(int) { time.Sleep(20 * time.Millisecond) }
	stats, err := loadtest.Surge{Rate: 500, Duration: 100 * time.Millisecond, MaxInFlight: 2}.Run(t.Context(), shop, "phone", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := stats.Surge; s.CapWaits == 0 || s.InFlightPeak != 2 || s.InFlightCap != 2 || s.CapWaitMax <= 0 || s.Outcomes.Total() != 50 {
		t.Errorf("cap waits %d (longest %.1f ms), in flight at peak %d of %d, %d answers; want waits at a peak of 2, 50 answers",
			s.CapWaits, s.CapWaitMax, s.InFlightPeak, s.InFlightCap, s.Outcomes.Total())
	}
}

// TestSurgeOutcomes: each answer counts once, by status and problem type,
// and those that never came as a timeout or a client error. The shop does
// not answer 500 or drop connections on demand, so a stand-in server
// gives each of eight answers to one arrival, by the arrival's rank (its
// buyer's name ends with it): the transport's own retry of a request with
// an Idempotency-Key on a dropped connection gets the same answer.
func TestSurgeOutcomes(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			UserID string `json:"user_id"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		rank, _ := strconv.Atoi(body.UserID[strings.LastIndex(body.UserID, "-")+1:])
		problem := func(status int, typ string) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"type":%q,"status":%d}`, typ, status)
		}
		switch rank {
		case 0:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"id":1}`)
		case 1:
			problem(http.StatusConflict, "sold-out")
		case 2:
			problem(http.StatusConflict, "limit-reached")
		case 3:
			problem(http.StatusServiceUnavailable, "busy")
		case 4:
			problem(http.StatusInternalServerError, "internal")
		case 5:
			problem(http.StatusBadRequest, "invalid-request")
		case 6:
			<-r.Context().Done() // past the surge's timeout
		case 7:
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	stats, err := loadtest.Surge{Rate: 80, Duration: 100 * time.Millisecond, Stock: 1, Timeout: 3 * time.Second}.Run(t.Context(), loadtest.Shop{URLs: []string{srv.URL}}, "phone", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := stats.Surge.Outcomes
	if got.Ordered != 1 || got.SoldOut != 1 || got.LimitReached != 1 || got.Busy != 1 || got.ServerErrors != 1 || got.OtherStatus != 1 ||
		got.Timeouts != 1 || got.ClientErrors != 1 || got.Total() != 8 || stats.Requests != 8 || stats.Errors != 4 {
		t.Errorf("outcomes %+v, %d answers, %d errors; want one of each of 8, the 500, the 400, the timeout and the dropped connection errors", got, stats.Requests, stats.Errors)
	}
	want := map[string]int{"201": 1, "409 sold-out": 1, "409 limit-reached": 1, "503": 1, "500 internal": 1, "400 invalid-request": 1, "timeout": 1, "client error: closed with no answer": 1}
	if !maps.Equal(got.ByStatus, want) {
		t.Errorf("by status %v, want %v", got.ByStatus, want)
	}
}

func TestSurgeValidate(t *testing.T) {
	t.Parallel()
	base := loadtest.Plan{Instances: 1, Stock: 1, Burst: loadtest.Burst{Buyers: 1}}
	for _, tc := range []struct {
		name  string
		surge loadtest.Surge
		want  string
	}{
		{"none", loadtest.Surge{}, ""},
		{"a tenth", loadtest.Surge{Rate: 100, Duration: time.Second}, ""},
		{"negative", loadtest.Surge{Rate: -1, Duration: time.Second}, "must not be negative"},
		{"too short", loadtest.Surge{Rate: 10, Duration: time.Millisecond}, "sends no buyers"},
		{"no stock", loadtest.Surge{Rate: 9, Duration: time.Second}, "a tenth of them is less than a unit"},
		{"more stock than buyers", loadtest.Surge{Rate: 10, Duration: time.Second, Stock: 11}, "must not pass its buyers"},
	} {
		p := base
		p.Surge = tc.surge
		err := p.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if u := (loadtest.Surge{Rate: 10000, Duration: 5 * time.Second}).Units(); u != 5000 {
		t.Errorf("a surge of 50,000 buyers has %d units, want a tenth, 5000", u)
	}
}

// surgeReport is a bench's report with a refusal loop and a surge, for
// the tests of how they are reported.
func surgeReport(measured bool) *loadtest.Report {
	rep := loadtest.NewReport("bench", loadtest.Plan{Instances: 2, Stock: 5, Burst: loadtest.Burst{Buyers: 10},
		Closed: loadtest.Closed{Buyers: 4, Duration: time.Second}, Surge: loadtest.Surge{Rate: 100, Duration: time.Second}})
	refusals := &loadtest.Phase{Stats: loadtest.Stats{Requests: 2000, SoldOut: 2000, Seconds: 2},
		CPU: loadtest.PerUnit([]loadtest.ClassCPU{{Class: "shops", Processes: 2, Seconds: 0.2}, {Class: "load generator", Processes: 1, Seconds: 0.1},
			{Class: "mysql", Processes: 1, Seconds: 0.02}, {Class: "redis 127.0.0.1:7000", Processes: 1, Seconds: 0.01}, {Class: "redis 127.0.0.1:7001", Processes: 1, Seconds: 0.01},
			{Class: "etcd", Processes: 1, Seconds: 0.04}}, 2000)}
	echo := 0.0
	if measured {
		echo = 4000
	} else {
		refusals.CPU = nil
	}
	surge := &loadtest.SurgeResult{
		Phase: loadtest.Phase{Stats: loadtest.Stats{Requests: 100, Ordered: 10, SoldOut: 85, Busy: 5, Seconds: 1.25, Throughput: 80,
			Latency: loadtest.Latency{P50: 3, P90: 8, P99: 20, P999: 30, Max: 31}}, Audit: audit.Audit{SKU: "surge", Initial: 10, Sold: 10, Orders: 10}},
		SurgeStats: loadtest.SurgeStats{Arrivals: 100, Stock: 10, AnswersPerSecond: 80, InFlightPeak: 12, InFlightCap: 10, CapWaits: 3, CapWaitMax: 4.5, SendLagMax: 5, AuditAfter: 1500,
			Outcomes:         loadtest.Outcomes{Ordered: 10, SoldOut: 84, Busy: 5, ClientErrors: 1, ByStatus: map[string]int{"201": 10, "409 sold-out": 84, "503": 5, "client error: closed with no answer": 1}},
			MySQLConnections: &loadtest.Connections{Before: 7, Peak: 31, Samples: 13, Source: "Threads_connected"}},
	}
	rep.Results = []loadtest.Result{{Strategy: "lua", Instances: 2, Burst: &loadtest.Phase{}, ClosedBuyers: 4, Closed: &loadtest.Phase{},
		Refusals: refusals, ClosedRefusals: loadtest.NewRefusals(refusals, echo), Surge: surge}}
	return rep
}

// TestRefusalsJSON: each result's closed_refusals is exactly
// {"refusals_per_s", "of_echo", "cpu_us": {"shops", "load", "mysql",
// "redis", "total"}}, CPU in microseconds per refusal; of_echo and cpu_us
// are null where the run measured no echo and no CPU.
func TestRefusalsJSON(t *testing.T) {
	t.Parallel()
	var got struct {
		Results []struct {
			ClosedRefusals map[string]json.RawMessage `json:"closed_refusals"`
		} `json:"results"`
	}
	decode(t, surgeReport(true), &got)
	c := got.Results[0].ClosedRefusals
	if keys := sortedKeys(c); !slices.Equal(keys, []string{"cpu_us", "of_echo", "refusals_per_s"}) {
		t.Fatalf("closed_refusals has %v, want exactly cpu_us, of_echo and refusals_per_s", keys)
	}
	var perSecond, ofEcho float64
	var cpu map[string]float64
	for _, f := range []struct {
		key string
		v   any
	}{{"refusals_per_s", &perSecond}, {"of_echo", &ofEcho}, {"cpu_us", &cpu}} {
		if err := json.Unmarshal(c[f.key], f.v); err != nil {
			t.Fatalf("%s: %v", f.key, err)
		}
	}
	if perSecond != 1000 || ofEcho != 0.25 {
		t.Errorf("refusals_per_s %g, of_echo %g; want 1000 and 0.25", perSecond, ofEcho)
	}
	// 0.2 s of the shops over 2,000 refusals is 100 µs each; Redis is a
	// cluster's two nodes together; total counts etcd too.
	want := map[string]float64{"shops": 100, "load": 50, "mysql": 10, "redis": 10, "total": 190}
	if keys := sortedKeys(cpu); !slices.Equal(keys, []string{"load", "mysql", "redis", "shops", "total"}) {
		t.Fatalf("cpu_us has %v, want exactly shops, load, mysql, redis and total", keys)
	}
	for k, v := range want {
		if d := cpu[k] - v; d > 1e-9 || d < -1e-9 {
			t.Errorf("cpu_us %v, want %v", cpu, want)
			break
		}
	}

	decode(t, surgeReport(false), &got)
	c = got.Results[0].ClosedRefusals
	if string(c["of_echo"]) != "null" || string(c["cpu_us"]) != "null" || len(c) != 3 {
		t.Errorf("unmeasured: closed_refusals %s; want of_echo and cpu_us null", c)
	}
}

// TestSurgeJSON: each result's surge has its latency, answers per second,
// outcomes, cap, the database's connections and the audit, under these
// names.
func TestSurgeJSON(t *testing.T) {
	t.Parallel()
	var got struct {
		Results []struct {
			Surge map[string]json.RawMessage `json:"surge"`
		} `json:"results"`
	}
	decode(t, surgeReport(true), &got)
	s := got.Results[0].Surge
	for _, key := range []string{"arrivals", "stock", "answers_per_s", "latency_ms", "outcomes", "in_flight_peak", "in_flight_cap",
		"cap_waits", "cap_wait_max_ms", "send_lag_max_ms", "audit_after_ms", "mysql_connections", "audit", "requests", "seconds"} {
		if _, ok := s[key]; !ok {
			t.Errorf("the surge has no %q: %v", key, sortedKeys(s))
		}
	}
	var latency map[string]float64
	var outcomes map[string]json.RawMessage
	var conns map[string]any
	for key, v := range map[string]any{"latency_ms": &latency, "outcomes": &outcomes, "mysql_connections": &conns} {
		if err := json.Unmarshal(s[key], v); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	if latency["p50"] != 3 || latency["p99"] != 20 || latency["max"] != 31 {
		t.Errorf("latency_ms %v, want p50 3, p99 20, max 31", latency)
	}
	if keys := sortedKeys(outcomes); !slices.Equal(keys, []string{"busy", "by_status", "client_errors", "limit_reached", "ordered", "other_status", "server_errors", "sold_out", "timeouts"}) {
		t.Errorf("outcomes has %v", keys)
	}
	if conns["peak"] != 31.0 || conns["before"] != 7.0 || conns["source"] != "Threads_connected" {
		t.Errorf("mysql_connections %v, want before 7, peak 31 and the source", conns)
	}
}

// TestRefusalsAndSurgeTables: the text report has a table of each, with
// the figures, and says when the surge hit its cap on requests in flight.
func TestRefusalsAndSurgeTables(t *testing.T) {
	t.Parallel()
	var text strings.Builder
	if err := surgeReport(true).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{
		"refusals: after each closed loop's search, a closed loop of its best step's buyers for 1s on a sold-out SKU",
		"surge: 100 arrivals/s for 1s (100 buyers, each its own Idempotency-Key), 10 units",
		"lua: the cap of 10 requests in flight was hit: 3 arrivals waited for a slot, up to 4.5 ms",
		"mysql before, peak: Threads_connected",
		"lua: the errors by status and problem type: 1 client error: closed with no answer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "lua" {
			rows[fmt.Sprint(len(rows))] = f
		}
	}
	// The burst's row, then the closed loop's, then the refusals' and the
	// surge's.
	refusals := strings.Join(rows["2"], " ")
	if want := "lua 4 1000 4000 25% 0.0 0.0 0 100.0 50.0 10.0 10.0 190.0 PASS"; refusals != want {
		t.Errorf("refusals row %q, want %q", refusals, want)
	}
	surge := strings.Join(rows["3"], " ")
	if want := "lua 100 80 3.0 20.0 31.0 10 84 5 0 0 0 1 10 0 0 0 12 3 5.0 7 31 1.5 PASS"; surge != want {
		t.Errorf("surge row %q, want %q", surge, want)
	}
}

func decode(t *testing.T, rep *loadtest.Report, v any) {
	t.Helper()
	var b strings.Builder
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b.String()), v); err != nil {
		t.Fatal(err)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
