package lock_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stockguard/shop/internal/lock"
	"github.com/stockguard/shop/internal/testinfra"
)

// The leases of these tests: a TTL, or a ZooKeeper session timeout. No
// test times a lease: a holder either must keep its lock (hold) or is
// meant to lose it (expire), and the tests wait for the loss, not for a
// moment.
const (
	// hold is the lease of a holder that must keep its lock until it
	// releases it, whatever the machine's load: the shop's default lease
	// (SHOP_LOCK_TTL). Renewed every third of it, it lasts while a renewal
	// comes up to two thirds of it, 6.6 s, late. On a 2-core machine that
	// other builds loaded to 30 and more, leases of 2 s, with 1.3 s to
	// spare, ran out under holders that were still using them.
	hold = 10 * time.Second
	// expire is the lease of a holder that a test pauses or cuts off, to
	// see it lose the lock: short, so that the test is quick.
	expire = 2 * time.Second
	// wait bounds every wait for something that must happen; a test that
	// reaches it has failed.
	wait = time.Minute
)

// redlockNodeTimeout is the Redlock masters' timeout for a client of lease
// lease: a fifth of it, 2 s for hold. The shop's 250 ms is no bound for a
// loaded machine, where a master's answer often took longer, and a round
// without a majority in time reads as a held lock.
func redlockNodeTimeout(lease time.Duration) time.Duration { return lease / 5 }

// client is one lock client with connections of its own, as one instance
// of the shop has. Its traffic goes through proxies, so that a test can
// pause it (as SIGSTOP would) or kill it.
type client struct {
	lock.Locker
	proxies []*testinfra.Proxy
}

func (c *client) pause() {
	for _, p := range c.proxies {
		p.Pause()
	}
}

func (c *client) resume() {
	for _, p := range c.proxies {
		p.Resume()
	}
}

func (c *client) cut() {
	for _, p := range c.proxies {
		p.Cut()
	}
}

// newClient makes a lock client with the given lease (hold or expire).
type newClient func(t *testing.T, lease time.Duration) *client

// backend is one lock store under test. setup starts or finds its servers
// and returns a constructor of independent clients.
type backend struct {
	name string
	// expires: a holder that stops answering loses the lock after a TTL
	// or session timeout. Local leases never expire.
	expires bool
	// lease is how long a silent holder of a hold lease keeps the lock.
	lease time.Duration
	setup func(t *testing.T) newClient
}

var backends = []backend{
	{name: "local", lease: 100 * time.Millisecond, setup: func(t *testing.T) newClient {
		l := lock.NewLocal() // one process: every client shares its mutexes
		return func(*testing.T, time.Duration) *client { return &client{Locker: l} }
	}},
	{name: "redis", expires: true, lease: hold, setup: func(t *testing.T) newClient {
		ns := testinfra.Redis(t)
		return func(t *testing.T, lease time.Duration) *client {
			c, p := redisClient(t, ns.Addr)
			return &client{Locker: lock.NewRedis(c, &lock.RedisOptions{TTL: lease, Prefix: ns.Prefix}), proxies: []*testinfra.Proxy{p}}
		}
	}},
	{name: "redlock", expires: true, lease: hold, setup: func(t *testing.T) newClient {
		var masters []string
		for range 3 {
			masters = append(masters, testinfra.OwnRedis(t))
		}
		return func(t *testing.T, lease time.Duration) *client {
			cl := &client{}
			var nodes []lock.RedisClient
			for _, addr := range masters {
				c, p := redisClient(t, addr)
				nodes = append(nodes, c)
				cl.proxies = append(cl.proxies, p)
			}
			var err error
			cl.Locker, err = lock.NewRedlock(nodes, &lock.RedisOptions{TTL: lease, NodeTimeout: redlockNodeTimeout(lease)})
			if err != nil {
				t.Fatal(err)
			}
			return cl
		}
	}},
	{name: "zookeeper", expires: true, lease: hold, setup: func(t *testing.T) newClient {
		// A private server: its short tick allows sessions short enough
		// for the expiry tests.
		addr := testinfra.StartZooKeeper(t).Addr()
		return func(t *testing.T, lease time.Duration) *client {
			conn, p := zkConn(t, addr, lease, nil)
			z, err := lock.NewZooKeeper(conn, &lock.ZooKeeperOptions{Root: "/locks"})
			if err != nil {
				t.Fatal(err)
			}
			return &client{Locker: z, proxies: []*testinfra.Proxy{p}}
		}
	}},
	{name: "etcd", expires: true, lease: hold, setup: func(t *testing.T) newClient {
		ns := testinfra.Etcd(t)
		return func(t *testing.T, lease time.Duration) *client {
			c, p := etcdClient(t, ns.Endpoints[0])
			e, err := lock.NewEtcd(c, &lock.EtcdOptions{TTL: lease, Prefix: ns.Prefix})
			if err != nil {
				t.Fatal(err)
			}
			return &client{Locker: e, proxies: []*testinfra.Proxy{p}}
		}
	}},
	{name: "dbtable", expires: true, lease: hold, setup: func(t *testing.T) newClient {
		testinfra.NeedsRealServers(t, "the dbtable lock speaks MySQL")
		dsn := testinfra.MySQL(t)
		testinfra.ShopDB(t, dsn) // the locks table
		return func(t *testing.T, lease time.Duration) *client {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			p := testinfra.StartProxy(t, cfg.Addr)
			cfg.Addr = p.Addr()
			sqlDB, err := sql.Open("mysql", cfg.FormatDSN())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sqlDB.Close() })
			return &client{Locker: lock.NewDBTable(sqlDB, &lock.DBTableOptions{TTL: lease}), proxies: []*testinfra.Proxy{p}}
		}
	}},
}

// redisClient connects to addr through a proxy of its own.
func redisClient(t *testing.T, addr string) (*redis.Client, *testinfra.Proxy) {
	p := testinfra.StartProxy(t, addr)
	// ContextTimeoutEnabled lets a deadline reach the socket, so that a
	// paused client's calls end with their ctx.
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c, p
}

// etcdClient connects to addr through a proxy of its own.
func etcdClient(t *testing.T, addr string) (*clientv3.Client, *testinfra.Proxy) {
	p := testinfra.StartProxy(t, addr)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, p
}

// zkConn connects to addr through a proxy of its own, with a session
// timeout of session. onEvent, if not nil, sees every event the client
// receives.
func zkConn(t *testing.T, addr string, session time.Duration, onEvent func(zk.Event)) (*zk.Conn, *testinfra.Proxy) {
	p := testinfra.StartProxy(t, addr)
	opts := []func(*zk.Conn){zk.WithLogger(log.New(io.Discard, "", 0))}
	if onEvent != nil {
		opts = append(opts, zk.WithEventCallback(onEvent))
	}
	conn, _, err := zk.Connect([]string{p.Addr()}, session, func(c *zk.Conn) {
		for _, o := range opts {
			o(c)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn, p
}

// property is one promise every backend keeps.
type property struct {
	name string
	// expiring: only for backends whose leases expire.
	expiring bool
	test     func(t *testing.T, b backend, newClient newClient)
}

var properties = []property{
	{"MutualExclusion", false, testMutualExclusion},
	{"TryAcquireFailsFast", false, testTryAcquire},
	{"AcquireEndsWithCtx", false, testAcquireCancelled},
	{"TokensIncrease", false, testTokensIncrease},
	{"Reentrancy", false, testReentrancy},
	{"WatchdogKeepsLongSection", false, testWatchdog},
	{"PausedHolderIsFenced", true, testPausedHolder},
	{"CrashedHolderFrees", true, testCrashedHolder},
}

func TestMain(m *testing.M) {
	// The proxies' cuts make the MySQL driver log each dropped connection.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	os.Exit(m.Run())
}

// TestLocks runs every property against every backend, on real servers.
func TestLocks(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			newClient := b.setup(t)
			for _, p := range properties {
				if p.expiring && !b.expires {
					continue
				}
				t.Run(p.name, func(t *testing.T) {
					t.Parallel()
					p.test(t, b, newClient)
				})
			}
		})
	}
}

// lockName is a lock name of the test's own.
func lockName(t *testing.T) string {
	return "test:" + strings.ReplaceAll(t.Name(), "/", ".")
}

func acquire(t *testing.T, c *client, name string) *lock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("acquire %s: %v", name, err)
	}
	return l
}

func release(t *testing.T, l *lock.Lease) {
	t.Helper()
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("release %s: %v", l.Name(), err)
	}
}

// wantLocked checks that another holder has the lock: TryAcquire fails with
// ErrLocked. The ctx has a long deadline, so a TryAcquire that waited
// instead of failing would end with the deadline, not ErrLocked.
func wantLocked(t *testing.T, c *client, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	l, err := c.TryAcquire(ctx, name)
	if err == nil {
		l.Release(ctx)
		t.Fatalf("TryAcquire %s succeeded while another holder had the lock", name)
	}
	if !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("TryAcquire %s: %v, want ErrLocked", name, err)
	}
}

// wantFree checks that the lock is free: TryAcquire succeeds at once.
func wantFree(t *testing.T, c *client, name string) {
	t.Helper()
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire %s on a free lock: %v", name, err)
	}
	release(t, l)
}

// testMutualExclusion: clients with connections of their own take the same
// lock from many goroutines, all released at once, and each holder works
// on a store that fences. No holder that kept its lease to its release
// was refused there: while it held the lock, no other holder, with a
// newer token or a token alike, came in. A holder whose lease ran out
// (a renewal too late for a loaded machine) may be refused: that is what
// the fence is for, and such a holder's release finds its lock gone.
func testMutualExclusion(t *testing.T, b backend, newClient newClient) {
	const clients, goroutines, rounds = 4, 4, 4
	name := lockName(t)
	var (
		store    fencedStore
		sections atomic.Int32
		lost     atomic.Int32
		gate     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for range clients {
		c := newClient(t, hold)
		for range goroutines {
			wg.Go(func() {
				<-gate
				for range rounds {
					ctx, cancel := context.WithTimeout(t.Context(), wait)
					l, err := c.Acquire(ctx, name)
					cancel()
					if err != nil {
						t.Errorf("acquire: %v", err)
						return
					}
					sections.Add(1)
					entered := store.enter(l.Token())
					time.Sleep(time.Millisecond) // work, so that others pile up
					wrote := entered && store.write(l.Token())
					switch err := l.Release(t.Context()); {
					case errors.Is(err, lock.ErrNotHeld):
						lost.Add(1)
					case err != nil:
						t.Errorf("release: %v", err)
					case !wrote:
						t.Errorf("the holder of token %d kept its lease, and the fence refused it (entered %v): "+
							"another holder came in while it held the lock", l.Token(), entered)
					}
				}
			})
		}
	}
	close(gate)
	wg.Wait()
	if n := sections.Load(); n != clients*goroutines*rounds {
		t.Fatalf("%d critical sections ran, want %d", n, clients*goroutines*rounds)
	}
	switch n := lost.Load(); {
	case n > 0 && !b.expires:
		t.Errorf("%d holders lost a lease that never expires", n)
	case n > 0:
		t.Logf("%d of %d holders lost their lease before they released it", n, sections.Load())
	}
}

// fencedStore is a store that fences with the lock's tokens, as the
// shop's stock rows do: a critical section enters it with its token,
// which must be newer than every token it has seen, and then writes,
// which it may only while no newer token has entered.
type fencedStore struct {
	mu    sync.Mutex
	fence int64 // the newest token that entered
}

// enter reports whether token is newer than every token that entered
// before, and makes it the fence if so.
func (s *fencedStore) enter(token int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token <= s.fence {
		return false
	}
	s.fence = token
	return true
}

// write reports whether token is still the newest that entered.
func (s *fencedStore) write(token int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return token == s.fence
}

// testTryAcquire: TryAcquire fails with ErrLocked while the lock is held,
// rather than wait, and leaves nothing that would block the next holder.
func testTryAcquire(t *testing.T, _ backend, newClient newClient) {
	a, b := newClient(t, hold), newClient(t, hold)
	name := lockName(t)
	l := acquire(t, a, name)
	wantLocked(t, b, name)
	release(t, l)
	wantFree(t, b, name)
}

// testAcquireCancelled: Acquire returns when its ctx ends, with the ctx's
// error, and leaves nothing behind that outlives its lease: once the holder
// releases, the lock is free. It is free at once, unless the waiter's last
// attempt was still on its way to the store when its ctx ended, and took
// the lock there after the release: a loaded machine delays a request that
// long now and then. That hold is on a lease that nobody renews, the short
// one the waiter has here, and it runs out; a lock that never expires
// (local) has no such attempt, and must be free at once.
func testAcquireCancelled(t *testing.T, b backend, newClient newClient) {
	a, waiter, c := newClient(t, hold), newClient(t, expire), newClient(t, hold)
	name := lockName(t)
	l := acquire(t, a, name)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if got, err := waiter.Acquire(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			got.Release(t.Context())
		}
		t.Fatalf("Acquire on a held lock with a short ctx: %v, want DeadlineExceeded", err)
	}
	release(t, l)
	free, err := c.TryAcquire(t.Context(), name)
	if errors.Is(err, lock.ErrLocked) && b.expires {
		t.Logf("the waiter's last attempt took the lock after the release; waiting for its lease to run out")
		free = acquire(t, c, name)
	} else if err != nil {
		t.Fatalf("TryAcquire %s once the holder released: %v", name, err)
	}
	release(t, free)
}

// testTokensIncrease: each acquisition's token exceeds the last, whichever
// client takes it, including a client that connects later.
func testTokensIncrease(t *testing.T, b backend, newClient newClient) {
	clients := []*client{newClient(t, hold), newClient(t, hold)}
	name := lockName(t)
	var last int64
	for i := range 10 {
		if i == 5 {
			clients = append(clients, newClient(t, hold))
		}
		l := acquire(t, clients[i%len(clients)], name)
		if l.Token() <= last {
			t.Errorf("acquisition %d: token %d after %d", i, l.Token(), last)
		}
		if want := b.name != "local"; l.Fences() != want { // Local's tokens order one process only
			t.Errorf("Fences() = %v, want %v", l.Fences(), want)
		}
		last = l.Token()
		release(t, l)
	}
}

// testReentrancy: a holder that carries its lease in the ctx takes the lock
// again at once, keeps it until it has released as often as it acquired,
// and cannot release it a time too many, not even from under the next
// holder.
func testReentrancy(t *testing.T, _ backend, newClient newClient) {
	a, b, c := newClient(t, hold), newClient(t, hold), newClient(t, hold)
	name := lockName(t)
	outer := acquire(t, a, name)
	ctx, cancel := lock.WithLease(t.Context(), outer)
	defer cancel()
	inner, err := a.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("re-entering: %v", err)
	}
	if inner != outer {
		t.Fatalf("re-entering returned another lease")
	}
	release(t, inner)
	wantLocked(t, b, name) // one acquisition is still held
	release(t, outer)
	next := acquire(t, b, name)
	if err := outer.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("releasing once more than acquired: %v, want ErrNotHeld", err)
	}
	wantLocked(t, c, name) // next still holds it
	release(t, next)
}

// testWatchdog: a critical section a quarter longer than its lease,
// through three renewals, keeps the lock throughout, without losing its
// lease, and releases it as its owner: unrenewed, the lease would have
// ended under it. Its subject is the renewal; the hold lease gives each renewal
// the slack a loaded machine needs.
func testWatchdog(t *testing.T, b backend, newClient newClient) {
	a, other := newClient(t, hold), newClient(t, hold)
	name := lockName(t)
	l := acquire(t, a, name)
	for end := time.Now().Add(b.lease + b.lease/4); time.Now().Before(end); time.Sleep(b.lease / 4) {
		wantLocked(t, other, name)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost during a long critical section: %v", err)
	}
	release(t, l)
}

// testPausedHolder: a holder paused past its lease (its traffic frozen, as
// SIGSTOP would) loses the lock to the next holder. When it wakes, its
// write is refused by the fence, its release is refused as it no longer
// owns the lock, and it learns that it lost the lease.
func testPausedHolder(t *testing.T, _ backend, newClient newClient) {
	a, b, c := newClient(t, expire), newClient(t, hold), newClient(t, hold)
	name := lockName(t)
	// A store that fences: a write carries its token and is refused once
	// a newer token has written.
	gdb := testinfra.ShopDB(t, testinfra.MySQL(t))
	if err := gdb.Exec(`CREATE TABLE fenced (name VARCHAR(64) PRIMARY KEY, fence BIGINT NOT NULL, writes INT NOT NULL)`).Error; err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec(`INSERT INTO fenced VALUES (?, 0, 0)`, name).Error; err != nil {
		t.Fatal(err)
	}
	write := func(token int64) bool {
		res := gdb.Exec(`UPDATE fenced SET fence = ?, writes = writes + 1 WHERE name = ? AND fence <= ?`, token, name, token)
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		return res.RowsAffected == 1
	}

	stale := acquire(t, a, name)
	a.pause()
	fresh := acquire(t, b, name) // once the paused holder's lease has run out
	if fresh.Token() <= stale.Token() {
		t.Fatalf("the next holder's token %d is not above the paused holder's %d", fresh.Token(), stale.Token())
	}
	if !write(fresh.Token()) {
		t.Fatal("the holder's write was refused")
	}
	a.resume()
	if write(stale.Token()) {
		t.Error("the paused holder's write got past the fence")
	}
	var writes int
	if err := gdb.Raw(`SELECT writes FROM fenced WHERE name = ?`, name).Scan(&writes).Error; err != nil || writes != 1 {
		t.Errorf("%d writes (%v), want the holder's alone", writes, err)
	}

	select {
	case <-stale.Lost():
		if !errors.Is(stale.Err(), lock.ErrLost) {
			t.Errorf("the paused holder's lease ended with %v, want ErrLost", stale.Err())
		}
	case <-time.After(wait):
		t.Fatal("the paused holder's lease was not lost")
	}
	if err := stale.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("the paused holder's release: %v, want ErrNotHeld", err)
	}
	wantLocked(t, c, name) // the release did not free the next holder's lock
	release(t, fresh)
}

// testCrashedHolder: a holder whose machine dies without a word keeps the
// lock only until its lease runs out.
func testCrashedHolder(t *testing.T, _ backend, newClient newClient) {
	a, b := newClient(t, expire), newClient(t, hold)
	name := lockName(t)
	crashed := acquire(t, a, name)
	a.cut()
	next := acquire(t, b, name)
	if next.Token() <= crashed.Token() {
		t.Errorf("token %d after the crashed holder's %d", next.Token(), crashed.Token())
	}
	release(t, next)
}

// TestZooKeeperNoHerd queues 20 waiters, each on a connection of its own,
// behind a holder, and hands the lock down the queue. Each release must
// wake one waiter: the watch events that the waiters still queued receive,
// counted on their connections, stay at zero.
func TestZooKeeperNoHerd(t *testing.T) {
	t.Parallel()
	const waiters = 20
	ns := testinfra.ZooKeeper(t)
	name := "herd"
	newLocker := func(onEvent func(zk.Event)) (*lock.ZooKeeper, *zk.Conn) {
		conn, _ := zkConn(t, ns.Addrs[0], hold, onEvent)
		z, err := lock.NewZooKeeper(conn, &lock.ZooKeeperOptions{Root: ns.Root})
		if err != nil {
			t.Fatal(err)
		}
		return z, conn
	}
	holder, observer := newLocker(nil)
	first := acquire(t, &client{Locker: holder}, name)

	var (
		events   [waiters]atomic.Int32
		conns    [waiters]*zk.Conn
		acquired = make(chan int)
		leases   [waiters]*lock.Lease
	)
	for i := range waiters {
		var z *lock.ZooKeeper
		z, conns[i] = newLocker(func(ev zk.Event) {
			if ev.Type != zk.EventSession && ev.Type != zk.EventNotWatching {
				events[i].Add(1)
			}
		})
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			l, err := z.Acquire(ctx, name)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
			leases[i] = l
			acquired <- i
		}()
	}
	// Every waiter has its node in the queue.
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		children, _, err := observer.Children(ns.Root + "/" + name)
		if err == nil && len(children) == waiters+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters did not queue: %v %v", children, err)
		}
	}

	queued := make(map[int]bool)
	for i := range waiters {
		queued[i] = true
	}
	release(t, first)
	woken := 0
	for range waiters {
		i := <-acquired
		if leases[i] == nil {
			t.FailNow()
		}
		delete(queued, i)
		// Its predecessor's deletion, unless that came before its watch.
		if n := events[i].Load(); n > 1 {
			t.Errorf("waiter %d was woken by %d watch events", i, n)
		}
		woken += int(events[i].Load())
		// A round trip on each connection: ZooKeeper sends a client its
		// watch events before the answer to any later request.
		for j := range queued {
			if _, err := conns[j].Sync("/"); err != nil {
				t.Fatal(err)
			}
		}
		for j := range queued {
			if n := events[j].Load(); n != 0 {
				t.Errorf("waiter %d, still queued, received %d watch events: a release woke more than one waiter", j, n)
			}
		}
		if t.Failed() {
			return
		}
		release(t, leases[i])
	}
	t.Logf("%d releases; the queued waiters received %d watch events in all", waiters+1, woken)
}

// TestRedlockNeedsThreeMasters: Redlock refuses to run without a majority
// that can survive the loss of a master.
func TestRedlockNeedsThreeMasters(t *testing.T) {
	t.Parallel()
	nodes := []lock.RedisClient{redis.NewClient(&redis.Options{}), redis.NewClient(&redis.Options{})}
	if _, err := lock.NewRedlock(nodes, nil); err == nil {
		t.Fatal("NewRedlock with 2 masters: no error")
	}
}

// raiseStore is a lock store that TestRaise restarts empty.
type raiseStore struct {
	name string
	// start starts the store's private servers and returns them, a
	// constructor of clients (each another instance of the shop), and
	// wipe, which deletes the lock "raise" from the store behind its
	// holder's back, as an expiry would.
	start func(t *testing.T) (servers []*testinfra.Server, newClient func() *client, wipe func())
}

var raiseStores = []raiseStore{
	{"redis", func(t *testing.T) ([]*testinfra.Server, func() *client, func()) { return redisStore(t, 1) }},
	{"redlock", func(t *testing.T) ([]*testinfra.Server, func() *client, func()) { return redisStore(t, 3) }},
	{"zookeeper", func(t *testing.T) ([]*testinfra.Server, func() *client, func()) {
		s := testinfra.StartZooKeeper(t)
		newClient := func() *client {
			conn, _ := zkConn(t, s.Addr(), hold, nil)
			z, err := lock.NewZooKeeper(conn, &lock.ZooKeeperOptions{Root: "/locks"})
			if err != nil {
				t.Fatal(err)
			}
			return &client{Locker: z}
		}
		wipe := func() {
			conn, _ := zkConn(t, s.Addr(), hold, nil)
			nodes, _, err := conn.Children("/locks/raise")
			for _, n := range nodes {
				err = cmp.Or(err, conn.Delete("/locks/raise/"+n, -1))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return []*testinfra.Server{s}, newClient, wipe
	}},
	{"etcd", func(t *testing.T) ([]*testinfra.Server, func() *client, func()) {
		s := testinfra.StartEtcd(t)
		c, _ := etcdClient(t, s.Addr())
		newClient := func() *client {
			e, err := lock.NewEtcd(c, &lock.EtcdOptions{TTL: hold, Prefix: "locks/"})
			if err != nil {
				t.Fatal(err)
			}
			return &client{Locker: e}
		}
		wipe := func() {
			if _, err := c.Delete(t.Context(), "locks/raise/", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
		}
		return []*testinfra.Server{s}, newClient, wipe
	}},
}

// redisStore starts n private redis-servers: one for redis, three for
// redlock.
func redisStore(t *testing.T, n int) ([]*testinfra.Server, func() *client, func()) {
	var servers []*testinfra.Server
	var nodes []*redis.Client
	for range n {
		s := testinfra.StartRedis(t)
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { c.Close() })
		servers, nodes = append(servers, s), append(nodes, c)
	}
	newClient := func() *client {
		if n == 1 {
			return &client{Locker: lock.NewRedis(nodes[0], &lock.RedisOptions{TTL: hold})}
		}
		l, err := lock.NewRedlock([]lock.RedisClient{nodes[0], nodes[1], nodes[2]}, &lock.RedisOptions{TTL: hold, NodeTimeout: redlockNodeTimeout(hold)})
		if err != nil {
			t.Fatal(err)
		}
		return &client{Locker: l}
	}
	wipe := func() {
		for _, c := range nodes {
			if err := c.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return servers, newClient, wipe
}

// TestRaise, on private servers restarted empty: a lock whose store lost
// its count hands out tokens below the earlier ones, and Raise lifts the
// lease's token, and every later token, past the fence; a lease that no
// longer holds its lock cannot raise. A local lease has nothing to raise.
func TestRaise(t *testing.T) {
	t.Parallel()
	for _, store := range raiseStores {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			servers, newClient, wipe := store.start(t)
			c := newClient()
			var fence int64 // the highest token, as a fenced store would have seen it
			for range 3 {
				l := acquire(t, c, "raise")
				fence = l.Token()
				release(t, l)
			}
			for _, s := range servers {
				s.Kill()
				s.Empty()
				s.Start()
			}
			held := acquire(t, newClient(), "raise")
			if held.Token() >= fence {
				t.Fatalf("token %d after the restart, want below %d: the count was not lost", held.Token(), fence)
			}
			if err := held.Raise(ctx, fence); err != nil {
				t.Fatal(err)
			}
			raised := held.Token()
			if raised <= fence {
				t.Fatalf("raised token %d, want above %d", raised, fence)
			}
			release(t, held)
			next := acquire(t, newClient(), "raise")
			if next.Token() <= raised {
				t.Errorf("next token %d, want above the raised %d", next.Token(), raised)
			}

			wipe()
			before := next.Token()
			if err := next.Raise(ctx, before); !errors.Is(err, lock.ErrNotHeld) && !errors.Is(err, lock.ErrLost) {
				t.Errorf("Raise of a lease whose lock is gone: %v, want ErrNotHeld or ErrLost", err)
			}
			if next.Token() != before {
				t.Errorf("token %d after a refused raise, want %d", next.Token(), before)
			}
			_ = next.Release(ctx) // not held any more
		})
	}
	t.Run("local", func(t *testing.T) {
		l := acquire(t, &client{Locker: lock.NewLocal()}, "raise")
		if err := l.Raise(t.Context(), 5); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Raise of a local lease: %v, want errors.ErrUnsupported", err)
		}
		release(t, l)
	})
}

// slowCall delays the call-th command a client sends by delay.
type slowCall struct {
	n     atomic.Int32
	call  int32
	delay time.Duration
}

func (*slowCall) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*slowCall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (s *slowCall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if s.n.Add(1) == s.call {
			time.Sleep(s.delay)
		}
		return next(ctx, cmd)
	}
}

// TestRedisAcquireWithoutDeadline: an acquisition whose ctx has no
// deadline waits as long as it takes, even when the step after the lock's
// script (redislock's Obtain, which bounds a call with no deadline by the
// TTL) comes late. A loaded machine makes it late now and then; the test
// delays it by a client hook, since a real server cannot be made to answer
// that one call late.
func TestRedisAcquireWithoutDeadline(t *testing.T) {
	t.Parallel()
	ns := testinfra.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: ns.Addr})
	t.Cleanup(func() { c.Close() })
	const short = 100 * time.Millisecond
	l := lock.NewRedis(c, &lock.RedisOptions{TTL: short, Prefix: ns.Prefix})
	if err := func() error { // loads the scripts, so that each step is one call
		lease, err := l.Acquire(context.Background(), "slow")
		if err == nil {
			// On a loaded machine the short TTL may have run out: the
			// release's script ran all the same.
			if err = lease.Release(context.Background()); errors.Is(err, lock.ErrNotHeld) {
				err = nil
			}
		}
		return err
	}(); err != nil {
		t.Fatal(err)
	}
	c.AddHook(&slowCall{call: 2, delay: 3 * short}) // the lock's script, then Obtain
	lease, err := l.Acquire(context.Background(), "slow")
	if err != nil {
		t.Fatalf("Acquire with no deadline: %v", err)
	}
	_ = lease.Release(context.Background()) // lost by now: the TTL is short
}
