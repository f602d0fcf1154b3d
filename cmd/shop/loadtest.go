package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/stockguard/shop/cmd/shop/internal/live"
	"github.com/stockguard/shop/cmd/shop/internal/sale"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// loadFlags are the flags demo and bench share, and those of them that
// load takes (newPlanFlags).
type loadFlags struct {
	plan               loadtest.Plan
	strategies         string
	config             func() (config.Config, error) // the shop's, once parsed
	jsonFile, htmlFile string
	cpuProfile         string // where to write this process's CPU profile; empty for none
	serve              string // the live view's listen address; empty for none
	note               string // the report's first line, if any
	fs                 *flag.FlagSet
}

func newLoadFlags(name string, getenv config.Getenv, stderr io.Writer, usage string) *loadFlags {
	f := newPlanFlags(name, stderr, usage)
	fs, p := f.fs, &f.plan
	fs.IntVar(&p.Instances, "instances", 3, "shop instances per strategy (K), requests go round robin")
	fs.Float64Var(&p.Unpaid, "unpaid", 0, "with --payment-window, the burst is an abandoned-cart sale: this share of the first --stock winners, at least 0 and below 1, never pay; their units come back when the window ends and sell to buyers still trying, who pay, as every later winner does, until every unit is paid")
	fs.StringVar(&f.strategies, "strategies", "", "comma-separated strategies to run; empty runs all: "+strings.Join(strategy.Names(), ", "))
	f.config = config.Flags(fs, getenv, strategy.Names(), config.ForLoad)
	fs.StringVar(&f.serve, "serve", "", "serve a live view of the run at this address, host:port, and keep serving it after the run until interrupted")
	return f
}

// newPlanFlags returns the flags of the loads and the report, which demo,
// bench and load share.
func newPlanFlags(name string, stderr io.Writer, usage string) *loadFlags {
	f := &loadFlags{fs: newFlags(name, usage, stderr)}
	fs, p := f.fs, &f.plan
	fs.IntVar(&p.Stock, "stock", 100, "units on sale in a burst (S)")
	fs.IntVar(&p.Burst.Buyers, "buyers", 2000, "buyers in a burst, one unit each (D)")
	fs.IntVar(&p.Burst.Concurrency, "concurrency", 0, "requests in flight at most; 0 sends every buyer of a burst at once")
	fs.DurationVar(&p.Burst.Arrivals, "arrivals", 0, "spread the burst's buyers evenly over this long, each sent at its time whatever the answers before it, and measure who won: first-come share, overtakes, latest winner, longest wait; 0 releases them at once")
	fs.DurationVar(&p.Burst.OvertakeGap, "overtake-gap", loadtest.DefaultOvertakeGap, "with --arrivals, an overtake is a buyer refused while one who arrived at least this much later won")
	fs.Float64Var(&p.Steady.Rate, "rate", 0, "after each burst, buyers per second at a steady rate; 0 skips it")
	fs.DurationVar(&p.Steady.Duration, "duration", 10*time.Second, "how long the steady rate runs")
	fs.DurationVar(&p.Closed.Duration, "closed", 0, "after each burst, a closed loop for this long (each step of its search, see --closed-max-buyers), stock for every buyer: the most orders/s sustained; then a closed loop of its best step's buyers for as long on a sold-out SKU, every request a new buyer and Idempotency-Key: the refusals/s sustained, any other answer an error; 0 skips both")
	fs.IntVar(&p.Closed.Buyers, "closed-buyers", 64, "buyers in the closed loop, each placing its next order when answered")
	fs.IntVar(&p.Closed.MaxBuyers, "closed-max-buyers", 1024, "run the closed loop again with twice the buyers, up to this many, until orders/s grow by less than 5% twice in a row or p99 passes --closed-p99, and report the best; at most --closed-buyers runs it once")
	fs.DurationVar(&p.Closed.P99, "closed-p99", 500*time.Millisecond, "the p99 latency a step of the closed loop's search must stay within; 0 for none")
	fs.Float64Var(&p.Surge.Rate, "surge", 0, "after every other load, a surge: buyers arriving at this rate per second for --surge-for, each sent at its time whatever the answers before it (an open loop), each its own buyer and Idempotency-Key, on a SKU with stock for a tenth of them (--surge-stock); reports the answers' latency, answers/s, their outcomes and, where the database is read, its connections at their peak; 0 skips it")
	fs.DurationVar(&p.Surge.Duration, "surge-for", 5*time.Second, "how long the surge's buyers keep arriving")
	fs.IntVar(&p.Surge.Stock, "surge-stock", 0, "units on sale in the surge; 0 puts a tenth of its buyers' worth on sale")
	fs.IntVar(&p.Surge.MaxInFlight, "surge-max-in-flight", loadtest.DefaultSurgeInFlight, "the surge's requests in flight at most, each a connection and a file descriptor of this process; an arrival that finds them all taken waits for one, late, and the report says how many did")
	fs.DurationVar(&p.Surge.Timeout, "surge-timeout", loadtest.DefaultSurgeTimeout, "how long a surge's buyer waits for its answer before it counts as a timeout")
	fs.IntVar(&p.Burst.Cart, "cart", 0, "a cart mix: every order of every load is a cart of one unit of each of 2 to this many distinct SKUs, in random order, drawn from max(N, 3) SKUs each with the load's stock (the load's SKU, then <sku>-2, <sku>-3, …), all or nothing; with --closed, the closed loop runs with single orders, then with the mix; at most 20; 0 or 1: every order one unit of one SKU")
	fs.BoolVar(&p.Check, "check", false, "record each burst's history and check every answer in it against the model of the shop: a history that is not linearizable fails its strategy (docs/linearizability.md)")
	fs.StringVar(&p.HistoryDir, "history", "", "write each burst's history (<strategy>.jsonl, read by shop check) and its page (<strategy>.html) into this directory, and check it as --check does")
	fs.StringVar(&f.jsonFile, "json", "", "also write every figure as JSON to this file")
	fs.StringVar(&f.htmlFile, "html", "", "also write a self-contained HTML report with charts to this file")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of this process for the whole run to this file, for go tool pprof: bench's load generator, or demo's load generator and shops")
	return f
}

// parse parses args and returns the shop's configuration.
func (f *loadFlags) parse(args []string) (config.Config, error) {
	if err := f.parsePlan(args); err != nil {
		return config.Config{}, err
	}
	f.plan.Strategies = config.List(f.strategies)
	cfg, err := f.config()
	f.plan.PaymentWindow = cfg.PaymentWindow
	return cfg, err
}

// parsePlan parses args, flags only, into the plan.
func (f *loadFlags) parsePlan(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", f.fs.Arg(0))
	}
	if f.plan.HistoryDir != "" {
		if err := os.MkdirAll(f.plan.HistoryDir, 0o755); err != nil {
			return fmt.Errorf("--history: %w", err)
		}
	}
	f.plan.Steady.Concurrency = f.plan.Burst.Concurrency
	f.plan.Steady.Cart, f.plan.Closed.Cart = f.plan.Burst.Cart, f.plan.Burst.Cart
	return nil
}

const demoUsage = `usage: shop demo [flags]

Runs a flash sale against every strategy, in this process, and prints what
the database says was sold. Servers that are not configured are embedded:
SQLite for MySQL, miniredis for Redis and the Redlock masters. ZooKeeper
cannot be embedded; without --zk its strategies are skipped.

`

func demo(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	f := newLoadFlags("demo", getenv, stderr, demoUsage)
	cfg, err := f.parse(args)
	if err != nil {
		return err
	}
	_, err = f.report(ctx, "shop demo", args, stdout, stderr, func(p sale.Progress) (*loadtest.Report, error) {
		return sale.Demo{Plan: f.plan, Config: cfg, Progress: p}.Run(ctx)
	})
	return err
}

const benchUsage = `usage: shop bench [flags]

Measures every strategy against real servers: first the baselines, the
shop's HTTP stack alone ('shop echo') and raw loops on one hot row or key
with no HTTP, then, for each strategy, K child 'shop serve' processes under
a burst, with --rate a steady load, with --closed a closed loop that shows
the most orders per second it sustains and one that shows the most
refusals per second, on a sold-out SKU, and with --surge an open loop of
arrivals past capacity. Each strategy is shown as a fraction of its own
baseline, and of the HTTP stack's.

With no MySQL server named (--mysql, SHOP_MYSQL_DSN; an SQLite file counts as
none) or no Redis server (--redis, SHOP_REDIS_ADDR), it runs as 'shop demo'
does instead: every shop in this process, on embedded servers, with no
ceilings, and its report says so; those figures are not comparable to a run
against real servers. --json and --html write the report to files.

`

func bench(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	f := newLoadFlags("bench", getenv, stderr, benchUsage)
	bin, _ := os.Executable()
	var b sale.Bench
	f.fs.StringVar(&b.Bin, "bin", bin, "the shop binary to run as 'serve'")
	f.fs.DurationVar(&b.Baseline, "baseline", 3*time.Second, "how long each baseline loops; 0 skips them")
	var err error
	if b.Config, err = f.parse(args); err != nil {
		return err
	}
	b.Plan = f.plan
	if embedded(b.Config) {
		f.note = embeddedNote
	}
	_, err = f.report(ctx, "shop bench", args, stdout, stderr, func(p sale.Progress) (*loadtest.Report, error) {
		if f.note == "" {
			b.Progress = p
			return b.Run(ctx)
		}
		rep, err := sale.Demo{Plan: f.plan, Config: b.Config, Progress: p}.Run(ctx)
		if rep != nil {
			rep.Kind = "bench"
			rep.Backends = append(rep.Backends, loadtest.Backend{Role: "shop", What: f.note})
		}
		return rep, err
	})
	return err
}

// embeddedNote heads a bench on embedded servers.
const embeddedNote = "in this process, on embedded servers (SQLite, miniredis), as shop demo runs: " +
	"figures not comparable to a bench against real servers (--mysql, --redis)"

// embedded says whether a bench runs on embedded servers: when it names no
// MySQL server (none, or an SQLite file) or no Redis server.
func embedded(cfg config.Config) bool {
	return cfg.MySQLDSN == "" || strings.HasPrefix(cfg.MySQLDSN, db.SQLitePrefix) || cfg.RedisAddr == ""
}

// report runs a load, which the progress bar and the live view hear, then
// prints its report and writes the files asked for.
func (f *loadFlags) report(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer, run func(sale.Progress) (*loadtest.Report, error)) (*loadtest.Report, error) {
	progress, done, err := f.progress(ctx, stderr)
	if err != nil {
		return nil, err
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return nil, done(err)
		}
		defer stop()
	}
	rep, err := run(progress)
	return rep, done(f.write(rep, err, cmd, args, stdout))
}

// write prints the report and writes the files asked for, even when the run
// stopped early, so that what was measured is kept.
func (f *loadFlags) write(rep *loadtest.Report, err error, cmd string, args []string, stdout io.Writer) error {
	if rep == nil {
		return err
	}
	rep.Command = strings.Join(append([]string{cmd}, config.MaskArgs(args)...), " ")
	if f.note != "" {
		fmt.Fprintf(stdout, "note: %s\n", f.note)
	}
	errs := []error{err, rep.WriteText(stdout)}
	for _, out := range []struct {
		file  string
		write func(io.Writer) error
	}{{f.jsonFile, rep.WriteJSON}, {f.htmlFile, rep.WriteHTML}} {
		if out.file != "" {
			errs = append(errs, writeFile(out.file, out.write))
		}
	}
	return errors.Join(errs...)
}

// startCPUProfile profiles this process's CPU into the file name until
// stop is called.
func startCPUProfile(name string) (stop func(), err error) {
	out, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	return errors.Join(write(f), f.Close())
}

// progress returns what hears the run: the progress bar on a terminal, and
// the live view if --serve asked for it, which starts listening now. done
// ends them, once the report is written: the live view serves the final
// state until ctx ends.
func (f *loadFlags) progress(ctx context.Context, stderr io.Writer) (p sale.Progress, done func(error) error, err error) {
	bar, clear := newProgress(stderr)
	if f.serve == "" {
		return bar, func(err error) error { clear(); return err }, nil
	}
	ln, err := net.Listen("tcp", f.serve)
	if err != nil {
		return nil, nil, fmt.Errorf("--serve: %w", err)
	}
	view := live.New()
	srv := &http.Server{Handler: view.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(stderr, "live view: %s\n", url)
	tee := tee{view}
	if bar != nil {
		tee = append(tee, bar)
	}
	return tee, func(err error) error {
		clear()
		view.Finish()
		if ctx.Err() == nil {
			fmt.Fprintf(stderr, "live view: the run has ended; still serving %s until interrupted\n", url)
			<-ctx.Done()
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		srv.Shutdown(sctx) // event streams end with the server's connections
		return err
	}, nil
}

// tee passes a run's progress to each of its members.
type tee []sale.Progress

func (t tee) Begin(total int) {
	for _, p := range t {
		p.Begin(total)
	}
}

func (t tee) Describe(what string) {
	for _, p := range t {
		p.Describe(what)
	}
}

func (t tee) Start(strategy, kind string, stock int) {
	for _, p := range t {
		p.Start(strategy, kind, stock)
	}
}

func (t tee) Add(a loadtest.Answer) {
	for _, p := range t {
		p.Add(a)
	}
}

func (t tee) Audited(strategy, kind string, ph *loadtest.Phase) {
	for _, p := range t {
		p.Audited(strategy, kind, ph)
	}
}

// bar shows progress on a terminal.
type bar struct{ *progressbar.ProgressBar }

// newProgress returns a progress bar on stderr if it is a terminal, else
// nil, and the function that clears it.
func newProgress(stderr io.Writer) (sale.Progress, func()) {
	f, ok := stderr.(*os.File)
	if !ok {
		return nil, func() {}
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil, func() {}
	}
	b := progressbar.NewOptions(-1, progressbar.OptionSetWriter(f), progressbar.OptionClearOnFinish(),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("answers"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30), progressbar.OptionSetPredictTime(false))
	return bar{b}, func() { b.Finish() }
}

func (b bar) Begin(total int)      { b.ChangeMax(total) }
func (b bar) Describe(what string) { b.ProgressBar.Describe(fmt.Sprintf("%-24s", what)) }
func (b bar) Add(loadtest.Answer)  { b.ProgressBar.Add(1) }

func (bar) Start(string, string, int)               {}
func (bar) Audited(string, string, *loadtest.Phase) {}
