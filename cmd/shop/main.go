// Command shop is the stockguard flash-sale shop.
//
//	shop serve     run the HTTP API
//	shop migrate   migrate the database schema: up, down N, status, force V
//	shop demo      show every strategy under a flash sale, with nothing installed
//	shop bench     measure every strategy against real servers, or embedded ones
//	shop load      send the bench's loads to a running deployment, and audit it
//	shop echo      serve the HTTP stack alone, the bench's http-echo ceiling
//	shop reconcile set lua's Redis stock from the database once, and say what it fixed
//	shop audit     check SKUs' invariants in the database
//	shop token     print a buyer token signed with SHOP_JWT_SECRET
//	shop pay       send a payment callback signed with SHOP_PAYMENT_SECRET
//	shop events    follow the order events as JSON lines
//	shop lesson    reproduce the seed articles' failures beside their fixes
//	shop version   print the build: module version and VCS revision
//
// See README.md, and docs/ for each subject.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/app"
	"github.com/stockguard/shop/internal/buildinfo"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/logrepeat"
	"github.com/stockguard/shop/internal/metrics"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/internal/tracing"
)

const usage = `usage: shop <command> [flags]

commands:
  serve     run the HTTP API
  migrate   migrate the database schema, with serve's settings:
            shop migrate up | down N | status | force V
  demo      show every strategy under a flash sale, with nothing installed
  bench     measure every strategy against real servers (embedded ones
            when none is named); --html FILE writes a report with charts
  load      send the bench's loads to a running deployment, audited through
            its API and with --mysql its database: shop load --target URL,...
  echo      serve the shop's HTTP stack with no backends (the bench's
            http-echo ceiling: the most any strategy can answer here)
  reconcile run lua's reconciliation once: persist the reservations that
            dead instances left pending, set Redis's stock from the
            database, and print what it found and fixed
  audit     check SKUs' invariants in the database, every unit explained by
            its movements and orders: shop audit SKU... [--mysql DSN]
  check     check sales' histories, written with --history DIR, answer by
            answer against a model of the shop: shop check FILE|DIR
  token     print a buyer token signed with SHOP_JWT_SECRET: shop token USER [--ttl D]
  pay       send the payment provider's callback for an order, signed with
            SHOP_PAYMENT_SECRET: shop pay ORDER_ID PAYMENT_ID [--url URL]
  events    follow the order events, one JSON line each: shop events [--from-start]
  lesson    reproduce the seed articles' failures beside their fixes:
            shop lesson (the list), shop lesson NAME, shop lesson all
  version   print the shop's version, VCS revision and Go version

Run 'shop <command> -h' for the flags of a command. Every flag can also be
set by its SHOP_* environment variable; a flag wins over the variable.
`

// drivers takes go-redis's and the MySQL driver's own lines. Their loggers
// are process globals that the drivers read without a lock, so they are
// set once, here, before any connection; serve points drivers at its log.
var drivers logrepeat.Drivers

func init() {
	redis.SetLogger(logrepeat.Redis{D: &drivers})
	_ = mysql.SetLogger(logrepeat.MySQL{D: &drivers})
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

// run is main with its dependencies passed in, so tests can call it.
func run(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch cmd, args := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, args, getenv, stderr)
	case "migrate":
		return migrate(ctx, args, getenv, stdout, stderr)
	case "demo":
		return demo(ctx, args, getenv, stdout, stderr)
	case "bench":
		return bench(ctx, args, getenv, stdout, stderr)
	case "load":
		return load(ctx, args, getenv, stdout, stderr)
	case "echo":
		return echo(ctx, args, getenv, stderr)
	case "reconcile":
		return reconcile(ctx, args, getenv, stdout, stderr)
	case "audit":
		return auditCmd(ctx, args, getenv, stdout, stderr)
	case "check":
		return checkCmd(args, stdout, stderr)
	case "token":
		return token(args, getenv, stdout, stderr)
	case "lesson":
		return lessonCmd(ctx, args, getenv, stdout, stderr)
	case "pay":
		return pay(ctx, args, getenv, stdout, stderr)
	case "events":
		return events(ctx, args, getenv, stdout, stderr)
	case "version":
		if len(args) > 0 {
			return errors.New("usage: shop version")
		}
		_, err := fmt.Fprintln(stdout, buildinfo.Read())
		return err
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// reconcile runs lua's reconciliation once and prints its report. It waits
// for the job's lock at most a few lock TTLs: an instance that holds it runs
// the job already.
func reconcile(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	cfg, err := config.Load(args, getenv, strategy.Names(), stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*cfg.LockTTL+cfg.RequestTimeout)
	defer cancel()
	rep, err := app.Reconcile(ctx, cfg, slog.New(slog.NewJSONHandler(stderr, nil)))
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(stdout, rep)
	return err
}

// shutdownTimeout bounds how long in-flight requests may finish after a
// signal before their connections are closed.
const shutdownTimeout = 15 * time.Second

func serve(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	cfg, err := config.Load(args, getenv, strategy.Names(), stderr)
	if err != nil {
		return err
	}
	stopProfile, err := profile(getenv)
	if err != nil {
		return err
	}
	defer stopProfile()
	log := slog.New(httpapi.LogRequestIDs(slog.NewJSONHandler(stderr, nil)))
	log.Info("starting", slog.Any("build", buildinfo.Read()), slog.Any("config", cfg))
	drivers.Use(log)
	if cfg.BuyerAuth == config.AuthNone {
		log.Warn("buyer authentication is off (SHOP_BUYER_AUTH=none): the buyer is whatever user_id a request names, " +
			"so anyone can order, refund and read as anyone; set SHOP_BUYER_AUTH=jwt outside demos and load tests")
	}
	if cfg.AllowReset {
		log.Warn("SHOP_ALLOW_RESET=true: whoever holds the admin token can delete a SKU with all its orders; " +
			"leave it unset outside demos and tests")
	}

	// Before the app, whose wiring asks whether tracing is on; shut down
	// after it, so that the spans of its last jobs are sent too.
	stopTracing, err := tracing.Start(ctx)
	if err != nil {
		return err
	}
	defer flushTraces(log, stopTracing)
	shop, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer shop.Close()
	if err := shop.WatchDB(); err != nil {
		return err
	}
	return listen(ctx, log, cfg, shop.Handler)
}

// flushTraces sends the spans not sent yet, for at most shutdownTimeout.
func flushTraces(log *slog.Logger, shutdown func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		log.Warn("tracing: spans lost at shutdown", slog.Any("err", err))
	}
}

func echo(ctx context.Context, args []string, getenv config.Getenv, stderr io.Writer) error {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := parseConfig(fs, args, config.Flags(fs, getenv, nil, config.ForEcho))
	if err != nil {
		return err
	}
	cfg.DebugAddr = ""
	stopProfile, err := profile(getenv)
	if err != nil {
		return err
	}
	defer stopProfile()
	return listen(ctx, slog.New(slog.NewJSONHandler(stderr, nil)), cfg, httpapi.Echo())
}

// listen serves handler on cfg's public address, and pprof and the
// metrics on its debug address unless it is empty, until ctx ends or a
// server fails; then it shuts every server down gracefully. It logs each
// address it listens on, the public one first.
func listen(ctx context.Context, log *slog.Logger, cfg config.Config, handler http.Handler) error {
	servers := []*http.Server{app.Server(cfg, cfg.HTTPAddr, handler)}
	if cfg.DebugAddr != "" {
		// The same timeouts: pprof moves its own write deadline on by the
		// length of the profile or trace it is asked for.
		servers = append(servers, app.Server(cfg, cfg.DebugAddr, debugMux()))
	}
	// Every listener opens before any serves, so that one that cannot
	// open leaves nothing serving behind it.
	lns := make([]net.Listener, 0, len(servers))
	for _, srv := range servers {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			return err
		}
		lns = append(lns, ln)
	}
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		log.Info("listening", slog.String("addr", lns[i].Addr().String()))
		go func() { errc <- srv.Serve(lns[i]) }()
	}

	var err error
	select {
	case err = <-errc: // one failed: the others stop too
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	errs := []error{err}
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			errs = append(errs, err, srv.Close())
		}
	}
	return errors.Join(errs...)
}

// tokenTTL is how long a token of `shop token` lasts unless --ttl says.
const tokenTTL = time.Hour

// token prints a buyer token for user, signed with SHOP_JWT_SECRET, with
// SHOP_JWT_ISSUER and SHOP_JWT_AUDIENCE when they are set.
func token(args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: shop token USER [--ttl D]\n\nPrints a buyer token for USER, signed with SHOP_JWT_SECRET (HS256).\n\n")
		fs.PrintDefaults()
	}
	ttl := fs.Duration("ttl", tokenTTL, "how long the token is valid")
	read := config.Flags(fs, getenv, nil, config.ForToken)
	var user string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		user, args = args[0], args[1:] // USER may come before the flags
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if user == "" && len(rest) > 0 {
		user, rest = rest[0], rest[1:]
	}
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	case !httpapi.ValidID(user):
		usageLine(stderr, "usage: shop token USER [--ttl D]")
		return fmt.Errorf("USER must be 1 to %d visible ASCII characters, got %q", httpapi.MaxIDLength, user)
	case *ttl <= 0:
		return fmt.Errorf("--ttl %s: must be positive", *ttl)
	}
	cfg, err := read()
	if err != nil {
		return err
	}
	if cfg.JWTSecret == "" {
		return errors.New("shop token signs with SHOP_JWT_SECRET (or --jwt-secret), which is not set; " +
			"with SHOP_JWT_PUBLIC_KEY, tokens come from whoever holds the private key")
	}
	t, err := mint(cfg, user, *ttl)
	if err != nil {
		return fmt.Errorf("SHOP_JWT_SECRET: %w", err)
	}
	_, err = fmt.Fprintln(stdout, t)
	return err
}

// debugMux serves pprof and the Prometheus metrics, apart from the public
// router.
func debugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
