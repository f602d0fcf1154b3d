package testinfra

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisSentinel is a Redis master with one replica, watched by three
// Sentinels, private to one test, whose master the test may fail:
// KillMaster crashes it and the Sentinels promote the replica, Failover
// hands over on request (SENTINEL FAILOVER). Replication is asynchronous,
// so a promoted replica may lack the master's last writes.
type RedisSentinel struct {
	t         testing.TB
	Name      string   // the master's name, as the Sentinels know it
	Sentinels []string // the Sentinels' addresses
	nodes     map[string]*Server
}

// The Sentinels' settings: a master is down after a second without an
// answer, and a failover that stalls is tried again after five.
const (
	sentinelDownAfter = 1000 // milliseconds
	sentinelFailover  = 5000 // milliseconds
)

// StartRedisSentinel starts a master and its replica, and three
// Sentinels that watch the master under the name "shop" (quorum 2). It
// returns once every Sentinel knows the replica and the other Sentinels,
// and the replica is in sync. redis-server runs as a Sentinel with
// --sentinel.
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	r := &RedisSentinel{t: t, Name: "shop", nodes: make(map[string]*Server)}
	master := StartRedis(t)
	host, port, _ := net.SplitHostPort(master.Addr())
	replica := StartRedis(t, "--replicaof", host, port)
	r.nodes[master.Addr()], r.nodes[replica.Addr()] = master, replica
	bin := lookPath(t, "redis-server", "redis-server")
	for range 3 {
		s := startOne(t, func() *Server {
			dir := t.TempDir()
			s := newServer(t, "redis-sentinel", freeAddr(t), dir, 30*time.Second)
			_, sport, _ := net.SplitHostPort(s.addr)
			conf := filepath.Join(dir, "sentinel.conf") // a Sentinel rewrites its file: one each
			body := fmt.Sprintf("bind 127.0.0.1\nport %s\ndir %s\nsentinel monitor %s %s %s 2\n"+
				"sentinel down-after-milliseconds %[3]s %[6]d\nsentinel failover-timeout %[3]s %[7]d\n",
				sport, dir, r.Name, host, port, sentinelDownAfter, sentinelFailover)
			if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
				t.Fatalf("testinfra: %v", err)
			}
			s.command = func() *exec.Cmd { return exec.Command(bin, conf, "--sentinel") }
			s.ready = func(ctx context.Context) error { return exchange(ctx, s.addr, "PING\r\n", "+PONG") }
			return s
		})
		r.Sentinels = append(r.Sentinels, s.Addr())
	}
	r.awaitSettled(master.Addr())
	return r
}

// Addr is SHOP_REDIS_ADDR for the shop: the Sentinels' addresses.
func (r *RedisSentinel) Addr() string { return strings.Join(r.Sentinels, ",") }

// Master returns the master's address, as a Sentinel names it.
func (r *RedisSentinel) Master() string {
	r.t.Helper()
	addr, err := r.masterBy(r.t.Context(), r.Sentinels[0])
	if err != nil {
		r.t.Fatalf("testinfra: Sentinel %s: master %s: %v", r.Sentinels[0], r.Name, err)
	}
	return addr
}

// MasterOf returns the master's address: every key lives there. It lets
// a test fail a Sentinel's master as it fails a Redis Cluster's.
func (r *RedisSentinel) MasterOf(string) string { return r.Master() }

func (r *RedisSentinel) masterBy(ctx context.Context, sentinel string) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: sentinel})
	defer c.Close()
	a, err := c.GetMasterAddrByName(ctx, r.Name).Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(a[0], a[1]), nil
}

// Lag makes master's replica fall behind from now on, as RedisCluster.Lag
// does, until Restore.
func (r *RedisSentinel) Lag(master string) {
	r.t.Helper()
	n := redis.NewClient(&redis.Options{Addr: master})
	defer n.Close()
	if err := n.ConfigSet(r.t.Context(), "client-output-buffer-limit", "replica 1 1 0").Err(); err != nil {
		r.t.Fatalf("testinfra: lag the replica of %s: %v", master, err)
	}
}

// KillMaster kills master (SIGKILL), as a crash, and returns the address
// of its replica once every Sentinel names the replica the master and it
// says so itself. The killed server stays down until Restore.
func (r *RedisSentinel) KillMaster(master string) (promoted string) {
	r.t.Helper()
	r.nodes[master].Kill()
	return r.awaitNewMaster(master)
}

// Kill is KillMaster, by the name RedisCluster has.
func (r *RedisSentinel) Kill(master string) (promoted string) { return r.KillMaster(master) }

// Failover asks a Sentinel to hand master over to its replica (SENTINEL
// FAILOVER, which does not wait for the replica to catch up), and
// returns the replica's address once every Sentinel names it the master.
// A Sentinel may give a failover up (it found no replica good enough, or
// a loaded machine put it in TILT mode): it asks again every 10 seconds,
// three times.
func (r *RedisSentinel) Failover(master string) (promoted string) {
	r.t.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: r.Sentinels[0]})
	defer c.Close()
	for try := 1; ; try++ {
		if err := c.Failover(r.t.Context(), r.Name).Err(); err != nil && !strings.HasPrefix(err.Error(), "INPROG") {
			r.t.Fatalf("testinfra: SENTINEL FAILOVER %s: %v", r.Name, err)
		}
		if try == 3 {
			return r.awaitNewMaster(master)
		}
		ctx, cancel := context.WithTimeout(r.t.Context(), 10*time.Second)
		promoted, _ = r.poll(ctx, r.newMaster(master))
		cancel()
		if promoted != "" {
			return promoted
		}
	}
}

// Restore starts the killed server again, which the Sentinels make the
// new master's replica, ends a Lag, and waits until the replica is in
// sync and every Sentinel knows it.
func (r *RedisSentinel) Restore() {
	r.t.Helper()
	for _, s := range r.nodes {
		if s.Pid() == 0 {
			s.Start()
		}
		n := redis.NewClient(&redis.Options{Addr: s.Addr()})
		err := n.ConfigSet(r.t.Context(), "client-output-buffer-limit", "replica 268435456 67108864 60").Err() // the default
		n.Close()
		if err != nil {
			r.t.Fatalf("testinfra: %s: %v", s.Addr(), err)
		}
	}
	r.awaitSettled(r.Master())
}

// awaitNewMaster waits until every Sentinel names a master other than
// old, which says it is master.
func (r *RedisSentinel) awaitNewMaster(old string) (promoted string) {
	r.t.Helper()
	r.await("a new master in place of "+old, func(ctx context.Context) (bool, error) {
		var err error
		promoted, err = r.newMaster(old)(ctx)
		return promoted != "", err
	})
	return promoted
}

// newMaster returns a check that every Sentinel names a master other
// than old, which says it is master: its address, "" while not.
func (r *RedisSentinel) newMaster(old string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		promoted := ""
		for _, s := range r.Sentinels {
			m, err := r.masterBy(ctx, s)
			if err != nil || m == old || (promoted != "" && m != promoted) {
				return "", err
			}
			promoted = m
		}
		if ok, err := says(ctx, promoted, "role:master"); !ok {
			return "", err
		}
		return promoted, nil
	}
}

// poll calls check every 50 ms until it returns an answer or ctx ends.
func (r *RedisSentinel) poll(ctx context.Context, check func(context.Context) (string, error)) (string, error) {
	for {
		v, err := check(ctx)
		if v != "" || ctx.Err() != nil {
			return v, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitSettled waits until every Sentinel names master, knows one replica
// and the two other Sentinels, and the replica is in sync with master.
func (r *RedisSentinel) awaitSettled(master string) {
	r.t.Helper()
	targets := make(map[string]int64)
	r.await(master+" settled with its replica and Sentinels", func(ctx context.Context) (bool, error) {
		for _, s := range r.Sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: s})
			m, err := c.Master(ctx, r.Name).Result()
			c.Close()
			if err != nil {
				return false, err
			}
			if net.JoinHostPort(m["ip"], m["port"]) != master || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" ||
				!strings.Contains(m["flags"], "master") || strings.Contains(m["flags"], "down") {
				return false, fmt.Errorf("sentinel %s: %v", s, m)
			}
		}
		n := redis.NewClient(&redis.Options{Addr: master})
		defer n.Close()
		info, err := n.Info(ctx, "replication").Result()
		if err != nil {
			return false, err
		}
		if !strings.Contains(info, "role:master") {
			return false, fmt.Errorf("%s: not master", master)
		}
		return caughtUp(info, targets, master)
	})
}

// says reports whether the server at addr says want in its INFO.
func says(ctx context.Context, addr, want string) (bool, error) {
	n := redis.NewClient(&redis.Options{Addr: addr})
	defer n.Close()
	info, err := n.Info(ctx, "replication").Result()
	return strings.Contains(info, want), err
}

// sentinelWait bounds a wait for the Sentinels: a failover they start
// late, on a busy machine, and one they try again, fit in it.
const sentinelWait = 60 * time.Second

// await polls check until it holds, for up to sentinelWait.
func (r *RedisSentinel) await(what string, check func(context.Context) (bool, error)) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), sentinelWait)
	defer cancel()
	var last error // why the check failed last, before the deadline
	done, _ := r.poll(ctx, func(ctx context.Context) (string, error) {
		ok, err := check(ctx)
		if ok {
			return "done", nil
		}
		if err != nil && ctx.Err() == nil {
			last = err
		}
		return "", err
	})
	if done == "" {
		r.t.Fatalf("testinfra: Redis Sentinel: not %s within %v: last: %v", what, sentinelWait, last)
	}
}
