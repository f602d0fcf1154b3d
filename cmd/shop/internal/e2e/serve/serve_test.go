package serve

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestServe drives a real `shop serve` through the API, then stops it with
// SIGTERM and expects a clean exit.
func TestServe(t *testing.T) {
	t.Parallel()
	dsn := testinfra.MySQL(t)
	redis := testinfra.Redis(t)
	base, cmd := shoptest.Start(t, "SHOP_MYSQL_DSN="+dsn, "SHOP_REDIS_ADDR="+redis.Addr, "SHOP_REDIS_PREFIX="+redis.Prefix, "SHOP_ADMIN_TOKEN=secret", "SHOP_STRATEGY=pessimistic")

	for _, probe := range []string{"/healthz", "/readyz"} {
		if code, body := shoptest.Send(t, "GET", base+probe, ""); code != http.StatusOK {
			t.Fatalf("%s: %d %s", probe, code, body)
		}
	}
	if code, body := shoptest.Send(t, "PUT", base+"/api/v1/stock/e2e", `{"quantity":3}`, "Authorization", "Bearer secret"); code != http.StatusOK {
		t.Fatalf("put stock: %d %s", code, body)
	}
	var created int
	for i := range 5 {
		code, body := shoptest.Send(t, "POST", base+"/api/v1/orders", fmt.Sprintf(`{"sku":"e2e","user_id":"u%d","quantity":1}`, i), "Idempotency-Key", fmt.Sprint("k", i))
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
	if code, body := shoptest.Send(t, "GET", base+"/api/v1/stock/e2e", ""); code != http.StatusOK || body != `{"sku":"e2e","initial":3,"available":0,"sold":3,"pending":0,"received":3}` {
		t.Errorf("stock: %d %s", code, body)
	}

	shoptest.Stop(t, cmd)
}

// TestDebugProfile: the debug listener serves a CPU profile that lasts
// longer than its write timeout, whole: pprof moves the write deadline on
// by the profile's length.
func TestDebugProfile(t *testing.T) {
	t.Parallel()
	r := testinfra.Redis(t)
	addrs, _ := shoptest.Serve(t, "--debug=127.0.0.1:0", []string{"SHOP_MYSQL_DSN=" + testinfra.MySQL(t), "SHOP_REDIS_ADDR=" + r.Addr, "SHOP_REDIS_PREFIX=" + r.Prefix,
		"SHOP_HTTP_READ_TIMEOUT=1s", "SHOP_REQUEST_TIMEOUT=1s", "SHOP_HTTP_WRITE_TIMEOUT=2s"})
	code, profile := shoptest.Send(t, "GET", "http://"+addrs[1]+"/debug/pprof/profile?seconds=3", "")
	if code != http.StatusOK || !strings.HasPrefix(profile, "\x1f\x8b") {
		t.Errorf("a 3 s profile under a 2 s write timeout: %d, %d bytes %.40q; want 200 and a gzipped profile", code, len(profile), profile)
	}
}

// slowClients is how many clients at once hold a connection open with an
// order's body that never arrives.
const slowClients = 200

// TestSlowBodies: 200 clients at once send the headers of an order that
// promise a body of 100 bytes, then 7 of those bytes, and nothing more;
// each connects again once cut off, until the test ends. Every connection
// is answered 408 request-timeout, or closed, within the read timeout and
// a second of its last byte, and a buyer's orders are served meanwhile.
func TestSlowBodies(t *testing.T) {
	t.Parallel()
	const readTimeout = time.Second
	s := newShop(t, fmt.Sprint("SHOP_HTTP_READ_TIMEOUT=", readTimeout))
	s.putStock(t, "slow", 100)
	addr := strings.TrimPrefix(s.base, "http://")

	var (
		mu      sync.Mutex
		cuts    []cut
		holding sync.WaitGroup // until every client has sent its first body's 7 bytes
		clients sync.WaitGroup
		stop    = make(chan struct{})
	)
	holding.Add(slowClients)
	for i := range slowClients {
		clients.Go(func() {
			for n := 0; ; n++ {
				c := slowBody(addr, fmt.Sprintf("slow-%d-%d", i, n), func() {
					if n == 0 {
						holding.Done()
					}
				})
				mu.Lock()
				cuts = append(cuts, c)
				mu.Unlock()
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	holding.Wait()

	var acked []int64
	for i := range 20 {
		r, err := shoptest.Post(t.Context(), http.DefaultClient, s.base+"/api/v1/orders", fmt.Sprint("buy-", i), fmt.Sprintf(`{"sku":"slow","user_id":"u%d","quantity":1}`, i))
		if err != nil || r.Code != http.StatusCreated {
			t.Errorf("order %d while the slow clients held their connections: %+v %v", i, r, err)
			continue
		}
		acked = append(acked, r.ID)
	}
	close(stop)
	clients.Wait()

	var slowest time.Duration
	answers := map[string]int{}
	for _, c := range cuts {
		answers[c.answer]++
		slowest = max(slowest, c.after)
		switch {
		case c.err != nil:
			t.Errorf("a slow client: %v", c.err)
		case c.answer != "408 request-timeout" && c.answer != "closed":
			t.Errorf("a slow client was answered %s, want 408 request-timeout or its connection closed", c.answer)
		case c.after > readTimeout+time.Second:
			t.Errorf("a slow client's connection was closed %s after its last byte, want within %s", c.after, readTimeout+time.Second)
		}
	}
	t.Logf("%d slow connections: %v; the slowest closed %s after its last byte", len(cuts), answers, slowest)
	if len(cuts) < slowClients {
		t.Errorf("%d slow connections, want at least %d", len(cuts), slowClients)
	}
	if a := s.audit(t, "slow", 0, acked); a.Orders != 20 {
		t.Errorf("%d orders in the database, want the buyer's 20", a.Orders)
	}
}

// cut is how the shop ended one slow client's connection.
type cut struct {
	answer string        // "408 request-timeout", or "closed" without an answer
	after  time.Duration // from the client's last byte until the connection closed
	err    error         // the client's own failure
}

// slowBody connects to addr and sends the headers of an order that
// promise 100 bytes of body, then 7 of them, and calls sent, once, even if
// it failed; then it waits until the shop closes the connection.
func slowBody(addr, key string, sent func()) cut {
	sent = sync.OnceFunc(sent)
	defer sent()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return cut{err: err}
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a bound on the test, should the shop never close it
	_, err = fmt.Fprintf(conn, "POST /api/v1/orders HTTP/1.1\r\nHost: shop\r\nContent-Type: application/json\r\nIdempotency-Key: %s\r\nContent-Length: 100\r\n\r\n", key)
	if err == nil {
		_, err = io.WriteString(conn, `{"sku":`)
	}
	last := time.Now()
	if err != nil {
		return cut{err: err}
	}
	sent()

	r := bufio.NewReader(conn)
	var c cut
	resp, err := http.ReadResponse(r, nil)
	if err == nil {
		var p struct{ Type string }
		err = json.NewDecoder(resp.Body).Decode(&p)
		c.answer = fmt.Sprint(resp.StatusCode, " ", p.Type)
		if err == nil {
			_, err = io.Copy(io.Discard, r) // until the shop closes it
		}
	} else if isClosed(err) {
		c.answer = "closed"
	}
	c.after = time.Since(last)
	if err != nil && !isClosed(err) {
		c.err = err
	}
	return c
}

// isClosed reports whether err is the peer closing the connection.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
