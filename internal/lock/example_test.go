package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stockguard/shop/internal/lock"
)

func ExampleLocal() {
	ctx := context.Background()
	locker := lock.NewLocal()

	lease, err := locker.Acquire(ctx, "stock:phone")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token", lease.Token())

	// Another holder in this process fails fast.
	_, err = locker.TryAcquire(ctx, "stock:phone")
	fmt.Println(errors.Is(err, lock.ErrLocked))

	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	lease, _ = locker.Acquire(ctx, "stock:phone")
	defer lease.Release(ctx)
	fmt.Println("token", lease.Token())
	// Output:
	// token 1
	// true
	// token 2
}

// A holder re-enters a lock it holds by carrying its lease in the ctx; it
// keeps the lock until it has released as often as it acquired.
func ExampleWithLease() {
	ctx := context.Background()
	locker := lock.NewLocal()

	outer, _ := locker.Acquire(ctx, "stock:phone")
	ctx, cancel := lock.WithLease(ctx, outer)
	defer cancel()

	inner, _ := locker.Acquire(ctx, "stock:phone") // at once: same holder
	fmt.Println(inner == outer)
	inner.Release(ctx)

	_, err := locker.TryAcquire(context.Background(), "stock:phone")
	fmt.Println("still held:", errors.Is(err, lock.ErrLocked))

	outer.Release(ctx)
	<-ctx.Done() // the work's ctx ends with the lease
	fmt.Println(context.Cause(ctx))
	// Output:
	// true
	// still held: true
	// lock: not held: released
}

// The watchdog pattern: the work runs under a ctx that ends when the lease
// is lost, and every write carries the fencing token.
func ExampleRedis() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	locker := lock.NewRedis(client, &lock.RedisOptions{TTL: 10 * time.Second})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := locker.Acquire(ctx, "stock:phone")
	if err != nil {
		log.Fatal(err) // the ctx ended first, or Redis failed
	}
	defer lease.Release(context.Background())

	work, stop := lock.WithLease(ctx, lease) // renewed every TTL/3 meanwhile
	defer stop()
	// Write with lease.Token(): "UPDATE … WHERE fence <= ?".
	_ = work
}

func ExampleRedlock() {
	var masters []lock.RedisClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"} {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer c.Close()
		masters = append(masters, c)
	}
	locker, err := lock.NewRedlock(masters, &lock.RedisOptions{TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	lease, err := locker.Acquire(ctx, "stock:phone") // a majority of the masters
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
}

func ExampleZooKeeper() {
	// The session timeout is the lease.
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	locker, err := lock.NewZooKeeper(conn, nil) // under /stockguard/locks
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := locker.Acquire(ctx, "stock:phone") // watches only its predecessor
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	select {
	case <-lease.Lost(): // the session expired
		log.Print(lease.Err())
	default:
	}
}

func ExampleEtcd() {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// Each acquisition holds a lease of TTL, kept alive by the client.
	locker, err := lock.NewEtcd(client, &lock.EtcdOptions{TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := locker.Acquire(ctx, "stock:phone") // watches only its predecessor
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	// The token is the lock key's create revision.
	fmt.Println(lease.Token() > 0)
	select {
	case <-lease.Lost(): // the etcd lease expired
		log.Print(lease.Err())
	default:
	}
}

func ExampleDBTable() {
	db, err := sql.Open("mysql", "shop:shop@tcp(127.0.0.1:3306)/shop?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	locker := lock.NewDBTable(db, &lock.DBTableOptions{TTL: 10 * time.Second}) // needs the locks table

	ctx := context.Background()
	lease, err := locker.TryAcquire(ctx, "nightly-report")
	if errors.Is(err, lock.ErrLocked) {
		return // another instance runs it
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
}
