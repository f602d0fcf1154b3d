package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/sale"
	"github.com/stockguard/shop/internal/testinfra"
)

// The process-level tests run `shop serve` as child processes, with real
// signals. They share one binary: SHOP_TEST_BIN names it (make test builds
// one), or shopBinary builds this package once per test run.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildDir holds the binary that shopBinary built; TestMain removes it.
var buildDir string

// shopBinary returns the path of the shop binary that the tests run. It is
// built without the race detector: the children are the system under test
// here, not the code under -race, which the in-process tests of the
// packages cover; built with it, each child would use several times the
// CPU and memory, and the fault tests start three at a time.
var shopBinary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("SHOP_TEST_BIN"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "shop-test-")
	if err != nil {
		return "", err
	}
	buildDir = dir
	bin := filepath.Join(dir, "shop")
	// go test puts its own go first on the PATH.
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// shopBin is shopBinary, or the end of the test.
func shopBin(t *testing.T) string {
	t.Helper()
	bin, err := shopBinary()
	if err != nil {
		t.Fatalf("the shop binary: %v", err)
	}
	return bin
}

// startShop runs `shop serve` in a child process on a random port and
// returns its base URL once it is ready.
func startShop(t *testing.T, env ...string) (string, *exec.Cmd) {
	t.Helper()
	addrs, cmd := runShop(t, "--debug=", env)
	return "http://" + addrs[0], cmd
}

// runShop runs `shop serve` with debug as its --debug flag, and returns the
// addresses it listens on, public first, once it listens on all of them.
func runShop(t *testing.T, debug string, env []string) ([]string, *exec.Cmd) {
	t.Helper()
	cmd, addr := spawnShop(t, debug, env)
	return listening(t, addr, addrCount(debug)), cmd
}

// addrCount is how many addresses `shop serve` with debug as its --debug
// flag listens on: the public one, and the debug one unless it is off.
func addrCount(debug string) int {
	if debug == "--debug=" {
		return 1
	}
	return 2
}

// spawnShop starts `shop serve` and returns at once, with the channel of
// the addresses it will listen on. Everything the child prints lands in
// the test's log before the test ends. A child that has not listened on
// all its addresses when a failed test ends overran listening's time: it
// gets SIGQUIT before it is killed, and its goroutine dump shows where its
// start was stuck.
func spawnShop(t *testing.T, debug string, env []string) (*exec.Cmd, <-chan string) {
	t.Helper()
	bin := shopBin(t)
	ctx, quit := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", debug)
	dumpOnCancel(cmd)
	cmd.Env = append(os.Environ(), "SHOP_HTTP_ADDR=127.0.0.1:0")
	cmd.Env = append(cmd.Env, env...)
	addr := make(chan string, 2)
	stderr := &childLog{t: t, addr: addr}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		quit()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && int(stderr.listened.Load()) < addrCount(debug) {
			quit()
		} else {
			cmd.Process.Kill()
		}
		cmd.Wait() // until all the child wrote is logged
		quit()
	})
	return cmd, addr
}

// quitWait is how long a child has to write its goroutine dump after
// SIGQUIT before it is killed: a dump takes well under a second, and the
// rest is a busy machine's margin.
const quitWait = 10 * time.Second

// dumpOnCancel makes cmd, made by exec.CommandContext, get SIGQUIT rather
// than SIGKILL when its context ends: the Go runtime then writes every
// goroutine's stack to stderr, which the test shows, and exits. A child
// still running quitWait later is killed.
func dumpOnCancel(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = quitWait
}

// childLog is a child's stderr: each line goes to the test's log, and each
// address the child listens on to addr. exec.Cmd.Wait returns once the
// child's last line is written here.
type childLog struct {
	t        *testing.T
	addr     chan<- string
	listened atomic.Int32
	partial  []byte
}

func (l *childLog) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	for {
		line, rest, ok := bytes.Cut(l.partial, []byte("\n"))
		if !ok {
			return len(p), nil
		}
		if a, ok := sale.ListenAddr(line); ok {
			l.listened.Add(1)
			l.addr <- a
		}
		l.t.Log(string(line))
		l.partial = rest
	}
}

// listening waits for want addresses on addr, at most 30 s.
func listening(t *testing.T, addr <-chan string, want int) []string {
	t.Helper()
	var addrs []string
	timeout := time.After(30 * time.Second)
	for len(addrs) < want {
		select {
		case a := <-addr:
			addrs = append(addrs, a)
		case <-timeout:
			t.Fatalf("shop listened on %v within 30s, want %d addresses", addrs, want)
		}
	}
	return addrs
}

func send(t *testing.T, method, url, body string, header ...string) (int, string) {
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

// TestServe drives a real `shop serve` through the API, then stops it with
// SIGTERM and expects a clean exit.
func TestServe(t *testing.T) {
	t.Parallel()
	dsn := testinfra.MySQL(t)
	redis := testinfra.Redis(t)
	base, cmd := startShop(t, "SHOP_MYSQL_DSN="+dsn, "SHOP_REDIS_ADDR="+redis.Addr, "SHOP_REDIS_PREFIX="+redis.Prefix, "SHOP_ADMIN_TOKEN=secret", "SHOP_STRATEGY=pessimistic")

	for _, probe := range []string{"/healthz", "/readyz"} {
		if code, body := send(t, "GET", base+probe, ""); code != http.StatusOK {
			t.Fatalf("%s: %d %s", probe, code, body)
		}
	}
	if code, body := send(t, "PUT", base+"/api/v1/stock/e2e", `{"quantity":3}`, "Authorization", "Bearer secret"); code != http.StatusOK {
		t.Fatalf("put stock: %d %s", code, body)
	}
	var created int
	for i := range 5 {
		code, body := send(t, "POST", base+"/api/v1/orders", fmt.Sprintf(`{"sku":"e2e","user_id":"u%d","quantity":1}`, i), "Idempotency-Key", fmt.Sprint("k", i))
		switch code {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
			if !strings.Contains(body, `"type":"sold-out"`) {
				t.Errorf("409 without sold-out: %s", body)
			}
		default:
			t.Errorf("order %d: %d %s", i, code, body)
		}
	}
	if created != 3 {
		t.Errorf("created %d orders, want 3", created)
	}
	if code, body := send(t, "GET", base+"/api/v1/stock/e2e", ""); code != http.StatusOK || body != `{"sku":"e2e","initial":3,"available":0,"sold":3,"pending":0,"received":3}` {
		t.Errorf("stock: %d %s", code, body)
	}

	stopShop(t, cmd)
}

// stopShop stops a shop that spawnShop started with SIGTERM and expects a
// clean exit. The shop may take shutdownTimeout for the requests under way
// and as long again to send its last spans; stopWait adds a busy machine's
// margin to that. A shop that overran it gets SIGQUIT, and its goroutine
// dump shows where its shutdown was stuck.
func stopShop(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	const stopWait = 2*shutdownTimeout + 30*time.Second
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("shop exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(stopWait):
		cmd.Cancel() // SIGQUIT
		select {
		case <-done:
		case <-time.After(quitWait):
			cmd.Process.Kill()
			<-done
		}
		t.Fatalf("shop did not exit within %v of SIGTERM", stopWait)
	}
}

// TestConfigErrors: bad configuration stops the shop before it listens, with
// an error that names the variable.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no dsn", map[string]string{}, "SHOP_MYSQL_DSN is required"},
		{"bad dsn", map[string]string{"SHOP_MYSQL_DSN": "nope"}, "SHOP_MYSQL_DSN"},
		{"bad strategy", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_STRATEGY": "magic"}, `unknown strategy "magic"`},
		{"bad ttl", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_LOCK_TTL": "soon"}, "SHOP_LOCK_TTL"},
		{"tiny ttl", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_LOCK_TTL": "1ms"}, "below the minimum"},
		{"bad addr", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_HTTP_ADDR": "8080"}, "SHOP_HTTP_ADDR"},
		{"bad zk", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_ZK_ADDRS": "zk1"}, "SHOP_ZK_ADDRS"},
		{"zookeeper without servers", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_STRATEGY": "zookeeper"}, "strategy zookeeper needs a ZooKeeper server (--zk or SHOP_ZK_ADDRS)"},
		{"redlock with one master", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_STRATEGY": "redlock", "SHOP_REDLOCK_ADDRS": "r1:6379"}, "strategy redlock needs SHOP_REDLOCK_ADDRS: at least 3"},
		{"jwt without a key", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_BUYER_AUTH": "jwt"}, "SHOP_BUYER_AUTH=jwt needs SHOP_JWT_SECRET (HS256) or SHOP_JWT_PUBLIC_KEY (RS256 or ES256)"},
		{"bad buyer rate", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_BUYER_RATE": "5"}, "SHOP_BUYER_RATE"},
		{"write timeout within the request's", map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/d", "SHOP_REQUEST_TIMEOUT": "30s"}, "SHOP_HTTP_WRITE_TIMEOUT: 15s must be longer than SHOP_REQUEST_TIMEOUT (30s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			err := run(context.Background(), []string{"serve"}, func(k string) string { return tt.env[k] }, io.Discard, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestSecretsMasked: the start-up log line carries the config without the
// database password, the admin token or the JWT secret.
func TestSecretsMasked(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	env := map[string]string{"SHOP_MYSQL_DSN": "shop:hunter2@tcp(127.0.0.1:1)/shop?timeout=200ms", "SHOP_ADMIN_TOKEN": "tok-secret", "SHOP_HTTP_ADDR": "127.0.0.1:0",
		"SHOP_BUYER_AUTH": "jwt", "SHOP_JWT_SECRET": "jwt-secret-of-at-least-32-bytes-long"}
	err := run(t.Context(), []string{"serve"}, func(k string) string { return env[k] }, io.Discard, &stderr)
	if err == nil {
		t.Fatal("serve with no database should fail")
	}
	log := stderr.String()
	if !strings.Contains(log, `"strategy":"atomic"`) {
		t.Fatalf("config not logged: %s", log)
	}
	if strings.Contains(log, "buyer authentication is off") {
		t.Errorf("warned that buyer authentication is off with SHOP_BUYER_AUTH=jwt: %s", log)
	}
	for _, secret := range []string{"hunter2", "tok-secret", "jwt-secret"} {
		if strings.Contains(log, secret) || strings.Contains(err.Error(), secret) {
			t.Errorf("%q leaked: %s %v", secret, log, err)
		}
	}
}

// TestBuyerAuthOffWarns: with buyer authentication off, as by default,
// serve says so at start, and so it does with SHOP_ALLOW_RESET=true.
func TestBuyerAuthOffWarns(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	env := map[string]string{"SHOP_MYSQL_DSN": "shop:x@tcp(127.0.0.1:1)/shop?timeout=200ms", "SHOP_HTTP_ADDR": "127.0.0.1:0", "SHOP_ALLOW_RESET": "true"}
	if err := run(t.Context(), []string{"serve"}, func(k string) string { return env[k] }, io.Discard, &stderr); err == nil {
		t.Fatal("serve with no database should fail")
	}
	for _, warning := range []string{`"level":"WARN","msg":"buyer authentication is off (SHOP_BUYER_AUTH=none)`, `"level":"WARN","msg":"SHOP_ALLOW_RESET=true: `} {
		if log := stderr.String(); !strings.Contains(log, warning) {
			t.Errorf("no warning %s: %s", warning, log)
		}
	}
}

// TestToken: a `shop serve` with SHOP_BUYER_AUTH=jwt takes the orders of a
// token that `shop token` printed, for its user, and refuses the request
// without it or with one that has expired.
func TestToken(t *testing.T) {
	t.Parallel()
	const secret = "a secret of at least thirty-two bytes"
	env := func(k string) string {
		return map[string]string{"SHOP_JWT_SECRET": secret, "SHOP_JWT_ISSUER": "test-issuer", "SHOP_JWT_AUDIENCE": "test-shop"}[k]
	}
	mint := func(args ...string) string {
		t.Helper()
		var stdout strings.Builder
		if err := run(t.Context(), append([]string{"token"}, args...), env, &stdout, io.Discard); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(stdout.String())
	}
	alice, expired := mint("alice"), mint("--ttl", "1s", "alice")
	s := newShop(t, "SHOP_BUYER_AUTH=jwt", "SHOP_JWT_SECRET="+secret, "SHOP_JWT_ISSUER=test-issuer", "SHOP_JWT_AUDIENCE=test-shop")
	s.putStock(t, "tok", 5)
	time.Sleep(2 * time.Second) // until expired has
	for _, c := range []struct {
		name, auth string
		want       int
	}{{"none", "", 401}, {"expired", "Bearer " + expired, 401}, {"alice", "Bearer " + alice, 201}} {
		code, body := send(t, "POST", s.base+"/api/v1/orders", `{"sku":"tok","quantity":1}`, "Idempotency-Key", c.name, "Authorization", c.auth)
		if code != c.want || (code == 201 && !strings.Contains(body, `"user_id":"alice"`)) {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.want)
		}
	}
	if a := s.audit(t, "tok", 0, nil); a.Sold != 1 {
		t.Errorf("sold %d, want 1", a.Sold)
	}
	for _, args := range [][]string{{}, {"a b"}, {"alice", "bob"}, {"alice", "--ttl", "-1s"}} {
		if err := run(t.Context(), append([]string{"token"}, args...), env, io.Discard, io.Discard); err == nil {
			t.Errorf("shop token %q: no error", args)
		}
	}
	if err := run(t.Context(), []string{"token", "alice"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "SHOP_JWT_SECRET") {
		t.Errorf("shop token without a secret: %v", err)
	}
}
