package testinfra

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterBus is how far above its port a cluster node listens for the
// other nodes.
const clusterBus = 10000

// RedisCluster is a Redis Cluster private to one test, whose masters the
// test may fail: Kill crashes one and its replica is promoted, Failover
// hands one over gracefully. Replication is asynchronous, so a promoted
// replica may lack the master's last writes.
type RedisCluster struct {
	t     testing.TB
	Seeds []string           // every node's address, masters first
	nodes map[string]*Server // by address
}

// StartReplicatedRedisCluster starts a Redis Cluster of three masters,
// each with one replica, that fails a master over quickly
// (cluster-node-timeout 1000 ms, and a replica may always be promoted:
// cluster-replica-validity-factor 0). It returns once the cluster is ok
// and every replica is in sync with its master.
func StartReplicatedRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	c := startCluster(t, 1, "--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0")
	c.AwaitSynced()
	return c
}

// startCluster starts three masters with replicas replicas each, args
// added to every node's, and waits until every node says the cluster is
// ok. redis-cli comes with redis-server.
func startCluster(t testing.TB, replicas int, args ...string) *RedisCluster {
	t.Helper()
	cli := lookPath(t, "redis-cli", "redis-server")
	c := &RedisCluster{t: t, nodes: make(map[string]*Server)}
	args = append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}, args...)
	for range 3 * (1 + replicas) {
		s := startOne(t, func() *Server { return redisServer(t, freeAddr(t, clusterBus), args...) })
		c.Seeds = append(c.Seeds, s.Addr())
		c.nodes[s.Addr()] = s
	}
	create := exec.Command(cli, append(append([]string{"--cluster", "create"}, c.Seeds...), "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("testinfra: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.AwaitOK()
	return c
}

// AwaitOK waits up to 30 seconds until every running node says the
// cluster is ok.
func (c *RedisCluster) AwaitOK() {
	c.t.Helper()
	c.await("every node says cluster_state:ok", func(ctx context.Context, n *redis.Client) (bool, error) {
		info, err := n.ClusterInfo(ctx).Result()
		return strings.Contains(info, "cluster_state:ok"), err
	})
}

// AwaitSynced waits up to 30 seconds until the cluster is ok and every
// master has a replica online at the master's replication offset.
func (c *RedisCluster) AwaitSynced() {
	c.t.Helper()
	c.AwaitOK()
	targets := make(map[string]int64) // by master
	c.await("every master's replica in sync", func(ctx context.Context, n *redis.Client) (bool, error) {
		info, err := n.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "role:master") {
			return err == nil, err
		}
		return caughtUp(info, targets, n.Options().Addr)
	})
}

// caughtUp reports whether the master whose INFO replication is info has
// one replica online that has acknowledged every write the master had
// when caughtUp first read it, which targets keeps by master. The
// master's offset itself keeps moving: a Sentinel publishes its hello
// through it every 2 seconds, and a shop writes.
func caughtUp(info string, targets map[string]int64, master string) (bool, error) {
	offset, err := strconv.ParseInt(field(info, "master_repl_offset:"), 10, 64)
	if err != nil {
		return false, fmt.Errorf("%s: master_repl_offset: %w", master, err)
	}
	target, ok := targets[master]
	if !ok {
		target, targets[master] = offset, offset
	}
	// slave0:ip=127.0.0.1,port=41234,state=online,offset=..,lag=..
	replica := field(info, "slave0:")
	if !strings.Contains(info, "connected_slaves:1") || !strings.Contains(replica, "state=online,") {
		return false, fmt.Errorf("%s: no replica online: %q", master, replica)
	}
	acked, err := strconv.ParseInt(replicaField(replica, "offset"), 10, 64)
	if err != nil || acked < target {
		return false, fmt.Errorf("%s: its replica acknowledged %q, want %d", master, replicaField(replica, "offset"), target)
	}
	return true, nil
}

// replicaField returns the value of key in a slave0 line of INFO.
func replicaField(line, key string) string {
	for kv := range strings.SplitSeq(line, ",") {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// await polls check on every running node until it holds on all of them.
func (c *RedisCluster) await(what string, check func(context.Context, *redis.Client) (bool, error)) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	defer cancel()
	for _, addr := range c.Seeds {
		if c.nodes[addr].Pid() == 0 {
			continue
		}
		n := redis.NewClient(&redis.Options{Addr: addr})
		for {
			ok, err := check(ctx, n)
			if ok {
				break
			}
			if ctx.Err() != nil {
				n.Close()
				c.t.Fatalf("testinfra: Redis Cluster: not %s within 30s: node %s: %v", what, addr, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		n.Close()
	}
}

// field returns the value of an INFO line that starts with name.
func field(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// MasterOf returns the address of the master that serves key's slot now.
func (c *RedisCluster) MasterOf(key string) string {
	c.t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.running()})
	defer cc.Close()
	m, err := cc.MasterForKey(c.t.Context(), key)
	if err != nil {
		c.t.Fatalf("testinfra: Redis Cluster: master of %q: %v", key, err)
	}
	return m.Options().Addr
}

// Kill kills master (SIGKILL), as a crash, and returns the address of
// its replica once the replica has been promoted and the cluster is ok
// again. The killed node stays down until Restore.
func (c *RedisCluster) Kill(master string) (promoted string) {
	c.t.Helper()
	replica := c.replicaOf(master)
	c.nodes[master].Kill()
	c.awaitMaster(replica, master)
	return replica
}

// Lag makes master's replica fall behind from now on, as a replica whose
// link is slow or broken: the master drops the replica's connection
// whenever it has anything to send it (a client-output-buffer-limit of
// one byte), so the replica keeps what it has and misses the writes that
// follow, until Restore. Replication on loopback is too quick for a kill
// alone to lose the last writes reliably.
func (c *RedisCluster) Lag(master string) {
	c.t.Helper()
	n := redis.NewClient(&redis.Options{Addr: master})
	defer n.Close()
	if err := n.ConfigSet(c.t.Context(), "client-output-buffer-limit", "replica 1 1 0").Err(); err != nil {
		c.t.Fatalf("testinfra: lag the replica of %s: %v", master, err)
	}
}

// Failover hands master's slots to its replica (CLUSTER FAILOVER on the
// replica, which waits for the master's last writes), and returns the
// replica's address once it is master and the cluster is ok.
func (c *RedisCluster) Failover(master string) (promoted string) {
	c.t.Helper()
	replica := c.replicaOf(master)
	n := redis.NewClient(&redis.Options{Addr: replica})
	defer n.Close()
	if err := n.ClusterFailover(c.t.Context()).Err(); err != nil {
		c.t.Fatalf("testinfra: CLUSTER FAILOVER on %s: %v", replica, err)
	}
	c.awaitMaster(replica, master)
	return replica
}

// Restore starts every killed node again, which rejoins as the replica of
// the master that took its slots, ends a Lag, and waits until every
// replica is in sync.
func (c *RedisCluster) Restore() {
	c.t.Helper()
	for _, s := range c.nodes {
		if s.Pid() == 0 {
			s.Start()
		}
		n := redis.NewClient(&redis.Options{Addr: s.Addr()})
		err := n.ConfigSet(c.t.Context(), "client-output-buffer-limit", "replica 268435456 67108864 60").Err() // the default
		n.Close()
		if err != nil {
			c.t.Fatalf("testinfra: %s: %v", s.Addr(), err)
		}
	}
	c.AwaitSynced()
	for _, addr := range c.Seeds {
		c.await(addr+" known", func(ctx context.Context, n *redis.Client) (bool, error) {
			nodes, err := n.ClusterNodes(ctx).Result()
			return role(nodes, addr) != "" && !strings.Contains(nodes, "fail"), err
		})
	}
}

// replicaOf returns the address of master's replica, as the cluster's
// configuration names it (CLUSTER NODES), not as INFO replication does: a
// master that drops its replica's link (Lag) lists no connected replica
// between the replica's reconnections.
func (c *RedisCluster) replicaOf(master string) string {
	c.t.Helper()
	n := redis.NewClient(&redis.Options{Addr: master})
	defer n.Close()
	nodes, err := n.ClusterNodes(c.t.Context()).Result()
	if err != nil {
		c.t.Fatalf("testinfra: CLUSTER NODES on %s: %v", master, err)
	}
	id := ""
	for _, line := range strings.Split(nodes, "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "myself") {
			id = f[0]
		}
	}
	for _, line := range strings.Split(nodes, "\n") {
		// <id> <ip:port@bus> <flags> <master's id> …
		if f := strings.Fields(line); len(f) > 3 && f[3] == id && strings.Contains(f[2], "slave") {
			return strings.SplitN(f[1], "@", 2)[0]
		}
	}
	c.t.Fatalf("testinfra: %s has no replica: %s", master, nodes)
	return ""
}

// awaitMaster waits until every running node sees node as a master and
// old, if it runs, as a replica, and the cluster is ok.
func (c *RedisCluster) awaitMaster(node, old string) {
	c.t.Helper()
	c.await(node+" promoted to master", func(ctx context.Context, n *redis.Client) (bool, error) {
		nodes, err := n.ClusterNodes(ctx).Result()
		if err != nil {
			return false, err
		}
		return role(nodes, node) == "master" && (c.nodes[old].Pid() == 0 || role(nodes, old) == "slave"), nil
	})
	c.AwaitOK()
}

// role returns addr's role in a CLUSTER NODES answer: master or slave.
func role(nodes, addr string) string {
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) > 2 && strings.HasPrefix(f[1], addr+"@") {
			for flag := range strings.SplitSeq(f[2], ",") {
				if flag == "master" || flag == "slave" {
					return flag
				}
			}
		}
	}
	return ""
}

// running returns the addresses of the nodes that run.
func (c *RedisCluster) running() []string {
	var addrs []string
	for _, addr := range c.Seeds {
		if c.nodes[addr].Pid() != 0 {
			addrs = append(addrs, addr)
		}
	}
	return addrs
}
