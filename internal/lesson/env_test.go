package lesson_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/shop/internal/lesson"
	"github.com/stockguard/shop/internal/testinfra"
)

// realEnv returns an Env on real servers, as `shop lesson` builds one with
// the services of scripts/services.sh: Redis, MariaDB and ZooKeeper, and
// masters private redis-servers of this test, so that a master can be
// killed and started empty.
func realEnv(t *testing.T, masters int) *lesson.Env {
	t.Helper()
	testinfra.NeedsRealServers(t, "the lessons run here on the real servers; cmd/shop's TestLessonsEmbedded runs them on the embedded backends")
	ns := testinfra.Redis(t)
	zk := testinfra.ZooKeeper(t)
	env := &lesson.Env{
		Redis:         client(t, ns.Addr),
		Advance:       time.Sleep,
		DB:            testinfra.ShopDB(t, testinfra.MySQL(t)),
		MySQL:         true,
		ZooKeeper:     zk.Addrs,
		ZooKeeperRoot: zk.Root,
		Prefix:        ns.Prefix,
	}
	for range masters {
		s := testinfra.StartRedis(t)
		env.Masters = append(env.Masters, lesson.Master{
			Client: client(t, s.Addr()),
			// Kill loses every write since the last Stop: a crash of a
			// master without persistence.
			RestartEmpty: func(context.Context) error { s.Kill(); s.Start(); return nil },
		})
	}
	return env
}

func client(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// run runs the lesson called name on env, and fails the test unless it ran
// to the end. The caller asserts what the stores said.
func run(t *testing.T, env *lesson.Env, name string) lesson.Result {
	t.Helper()
	l, ok := lesson.Find(name)
	if !ok {
		t.Fatalf("no lesson %q", name)
	}
	r := l.Run(t.Context(), env)
	if r.Skipped != "" || r.Err != "" {
		t.Fatalf("%s: skipped %q, error %q", name, r.Skipped, r.Err)
	}
	return r
}

// A lesson skipped for want of a server names the flag and the variable
// that give it, as the demo does.
func TestSkipNamesTheFlag(t *testing.T) {
	t.Parallel()
	l, ok := lesson.Find("zk-herd")
	if !ok {
		t.Fatal("no zk-herd")
	}
	r := l.Run(t.Context(), &lesson.Env{})
	if want := "needs a ZooKeeper server (--zk or SHOP_ZK_ADDRS): "; !strings.HasPrefix(r.Skipped, want) {
		t.Errorf("skipped: %q, want it to start with %q", r.Skipped, want)
	}
}
