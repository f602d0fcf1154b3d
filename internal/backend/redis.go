package backend

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/config"
)

// RedisOptions are the options of the client of the Redis that cfg
// names: one server; several seed nodes of a Redis Cluster; or, with
// SHOP_REDIS_SENTINEL_MASTER, the Sentinels of a master, which the client
// asks for the master's address and follows through a failover.
func RedisOptions(cfg config.Config) *redis.UniversalOptions {
	return &redis.UniversalOptions{Addrs: cfg.RedisAddrs(), MasterName: cfg.RedisSentinel}
}

// NewRedis returns the client of the Redis that o describes (see
// RedisOptions): one server's; a Redis Cluster's, which follows the
// cluster's topology by itself; or a master's under Sentinel, which
// always talks to the master (never a replica: every use of Redis here
// writes, or must read what was just written).
//
// go-redis reloads a cluster's slots on a MOVED reply to a single
// command, and otherwise only now and then; a master that died, and whose
// replica was promoted, would be dialled until then. So a cluster's
// client here reloads its slots whenever a command or a pipeline fails as
// a failover shows: MOVED, a dead connection, or CLUSTERDOWN. And every
// client waits out a failover within its caller's deadline (failoverWait).
// See docs/operations.md#redis-failover.
func NewRedis(o *redis.UniversalOptions) redis.UniversalClient {
	o.ReadOnly, o.RouteByLatency, o.RouteRandomly = false, false, false
	rdb := redis.NewUniversalClient(o)
	rdb.AddHook(failoverWait{})
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		cc.AddHook(topology{cc})
	}
	return rdb
}

// topology reloads its cluster's slots after a failure that may mean
// they moved. Reloads run in the background, one at a time.
type topology struct{ cc *redis.ClusterClient }

func (topology) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h topology) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.after(err)
		return err
	}
}

func (h topology) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.after(cmd.Err())
		}
		return err
	}
}

func (h topology) after(err error) {
	if Moved(err) || Unavailable(err) {
		h.cc.ReloadState(context.Background())
	}
}

// Moved reports whether err is a MOVED or ASK redirection that reached
// the caller.
func Moved(err error) bool {
	return err != nil && (strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK "))
}

// redisReady checks that Redis answers, at once (it does not wait out a
// failover): a cluster when every master answers and the cluster is ok,
// so that /readyz shows a failover while it lasts. go-redis's own
// retries, each of which dials a few times, span about two seconds, and
// under Sentinel a dial asks for the master anew: a check that let them
// run would span an election and answer ready at its end. So the check
// gets readyCheckTime at most.
// readyCheckTime bounds redisReady: far longer than a Redis on a loaded
// machine takes to answer, far shorter than a failover.
const readyCheckTime = time.Second

func redisReady(ctx context.Context, rdb redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, noWait{}, true), readyCheckTime)
	defer cancel()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		return nil
	}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.ClusterInfo(ctx).Result()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = fmt.Errorf("%s: cluster_state is not ok", m.Options().Addr)
		}
		return err
	})
	if err != nil {
		cc.ReloadState(ctx)
		return fmt.Errorf("redis cluster: %w", err)
	}
	return nil
}
