package lesson

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/mariadb"
	"github.com/stockguard/shop/internal/stock"
)

// The sale of async-failover: its units, how many buyers buy while the
// replica keeps up, and how long the rest try while its link is down,
// before the primary dies. The window is well within the semi-sync
// timeout.
const (
	failoverUnits   = 10
	failoverBefore  = 4
	failoverWindow  = time.Second
	failoverTimeout = 10 * time.Second // rpl_semi_sync_master_timeout, MariaDB's default
)

func init() {
	register(Lesson{Number: 17, Name: "async-failover", Seed: "seed 002",
		Claim: "ranked by reliability the database comes last (ZooKeeper > cache > database), without a measurement; what it keeps through a failover depends on how it replicates",
		Setup: fmt.Sprintf("a MariaDB primary and its replica, started for the lesson; %d units; %d buyers buy, then the replica's link goes down and %d more try for %v; the primary is killed (kill -9), the replica promoted, and the sale goes on there",
			failoverUnits, failoverBefore, failoverUnits-failoverBefore, failoverWindow),
		Takeaway: "replicate semi-synchronously (AFTER_SYNC): a commit is answered once a replica has it, so a failover loses no acknowledged order; watch Rpl_semi_sync_master_status, for after rpl_semi_sync_master_timeout with no replica the primary goes on asynchronously without a word",
		Needs:    []Need{{MariaDBServer, "it starts a primary and a replica of its own (mariadbd, from the Debian package mariadb-server), and kills the primary"}},
		Mistake: func(ctx context.Context, env *Env) (Trial, error) {
			return replicatedFailover(ctx, env, false)
		},
		Fix: func(ctx context.Context, env *Env) (Trial, error) {
			return replicatedFailover(ctx, env, true)
		},
	})
}

// replicatedFailover sells on a pair of the lesson's own, replicating
// semi-synchronously or not, through a failover, and counts the orders
// the buyers were given against what the promoted replica kept and sold.
func replicatedFailover(ctx context.Context, env *Env, semiSync bool) (Trial, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "stockguard-async-failover-")
	if err != nil {
		return Trial{}, err
	}
	defer os.RemoveAll(dir)
	p, err := startPair(ctx, dir)
	defer p.close()
	if err != nil {
		return Trial{}, err
	}
	primary, err := p.shop(ctx, 0)
	if err != nil {
		return Trial{}, err
	}
	sku := env.Prefix + "async-failover"
	if err := stock.Reset(ctx, primary, sku, failoverUnits); err != nil {
		return Trial{}, err
	}
	if semiSync {
		if err := mariadb.SemiSync(ctx, p.Admin[0], true, failoverTimeout); err != nil {
			return Trial{}, err
		}
		if err := mariadb.AwaitSemiSync(ctx, p.Admin[0]); err != nil {
			return Trial{}, err
		}
	}
	given, err := sellThroughFailover(ctx, p, primary, sku)
	if err != nil {
		return Trial{}, err
	}
	promoted, err := p.shop(ctx, 1)
	if err != nil {
		return Trial{}, err
	}
	var kept int64
	if err := promoted.WithContext(ctx).Table("orders").Where("sku = ? AND user_id IN ?", sku, append(given, "")).Count(&kept).Error; err != nil {
		return Trial{}, err
	}
	// The sale goes on at the promoted replica, until it says sold out.
	again := 0
	for ; again < failoverUnits; again++ {
		err := stock.NewAtomic(promoted).Adjust(ctx, sku, -1, ordered(sku, fmt.Sprint("later-", again)))
		if errors.Is(err, stock.ErrSoldOut) {
			break
		} else if err != nil {
			return Trial{}, err
		}
	}
	lost, oversold := len(given)-int(kept), max(len(given)+again-failoverUnits, 0)
	name := map[bool]string{false: "asynchronous replication", true: "semi-synchronous replication (AFTER_SYNC)"}[semiSync]
	return Trial{Name: name,
		Numbers: map[string]int64{"units": failoverUnits, "acknowledged": int64(len(given)), "lost": int64(lost),
			"sold_after_failover": int64(again), "oversold": int64(oversold)},
		Happened: fmt.Sprintf("%d buyers were given an order before the primary died; the promoted replica lacks %d of them and sold %d units after: %d orders given for %d units, %d oversold",
			len(given), lost, again, len(given)+again, failoverUnits, oversold),
		Failed: lost > 0 || oversold > 0}, nil
}

// sellThroughFailover sells on the primary, cuts the replica's link,
// sells on for failoverWindow, kills the primary and promotes the
// replica. It returns the buyers given an order.
func sellThroughFailover(ctx context.Context, p *pair, primary *gorm.DB, sku string) ([]string, error) {
	if err := mariadb.CatchUp(ctx, p.Admin[0], p.Admin[1]); err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		given []string
		wg    sync.WaitGroup
	)
	buy := func(buyer string) error {
		err := stock.NewAtomic(primary).Adjust(ctx, sku, -1, ordered(sku, buyer))
		if err == nil {
			mu.Lock()
			given = append(given, buyer)
			mu.Unlock()
		}
		return err
	}
	for i := range failoverBefore {
		if err := buy(fmt.Sprint("buyer-", i)); err != nil {
			return nil, err
		}
	}
	if _, err := p.Admin[1].ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
		return nil, err
	}
	for i := failoverBefore; i < failoverUnits; i++ {
		// A buyer whose commit still waits when the primary dies is told
		// nothing: its error is no order given.
		wg.Go(func() { buy(fmt.Sprint("buyer-", i)) })
	}
	time.Sleep(failoverWindow)
	p.Procs[0].Kill()
	wg.Wait()
	return given, mariadb.Promote(ctx, p.Admin[1])
}

// pair is the lesson's primary and replica, and its connections to the
// shop's database on them.
type pair struct {
	*mariadb.Pair
	shops []*gorm.DB
}

// startPair starts a pair in dir, with the shop's schema on the primary,
// replicated.
func startPair(ctx context.Context, dir string) (*pair, error) {
	mp, err := mariadb.StartPair(ctx, dir)
	p := &pair{Pair: mp}
	if err != nil {
		return p, err
	}
	if _, err := p.Admin[0].ExecContext(ctx, "CREATE DATABASE shop"); err != nil {
		return p, err
	}
	primary, err := p.shop(ctx, 0)
	if err != nil {
		return p, err
	}
	return p, db.Migrate(ctx, primary)
}

// shop opens the shop's database on node i as mariadb.Shop.
func (p *pair) shop(ctx context.Context, i int) (*gorm.DB, error) {
	gdb, err := db.Open(ctx, p.Nodes[i].DSN(mariadb.Shop, "shop"))
	if err == nil {
		p.shops = append(p.shops, gdb)
	}
	return gdb, err
}

// close closes the connections and kills the servers.
func (p *pair) close() {
	for _, gdb := range p.shops {
		db.Close(gdb)
	}
	p.Pair.Close()
}
