package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/testinfra"
)

// The election tests sell on three `shop serve` processes whose lock is
// on an ensemble of three, and kill its leader (SIGKILL) mid-burst; the
// two others elect a new one in about a second. A lock request waits
// through the election within the request's deadline, so few buyers are
// answered busy: at most electionBusyShare of them. The lease is the
// default SHOP_LOCK_TTL, which an election does not use up; the request's
// deadline, SHOP_REQUEST_TIMEOUT, is 4s, below the buyers' 5s, and room
// enough for an election and the queue behind it on a loaded machine.
// Nothing is oversold, every acknowledged order replays, and the same
// processes then sell a new SKU exactly.

// electionShape is an election test's burst: the buyers arrive over about
// a second, and the leader is killed once a tenth of the units are sold,
// so that most of them arrive during the election or soon after it.
var electionShape = burstShape{units: 50, buyers: 400, arrival: 3 * time.Millisecond, faultAt: 5}

// electionBusyShare is the most buyers of a burst that an election of
// about a second may cost a 503.
const electionBusyShare = 0.10

// TestFaultEtcdLeader kills the leader of a three-member etcd cluster
// mid-sale, under etcd.
func TestFaultEtcdLeader(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	e := testinfra.StartEtcdCluster(t)
	loseLeader(t, "etcd", e, "SHOP_ETCD_ADDRS="+strings.Join(e.Addrs(), ","))
}

// TestFaultZooKeeperLeader kills the leader of a three-server ZooKeeper
// ensemble mid-sale, under zookeeper.
func TestFaultZooKeeperLeader(t *testing.T) {
	t.Parallel()
	faultsNeedServers(t)
	e := testinfra.StartZooKeeperEnsemble(t)
	loseLeader(t, "zookeeper", e, "SHOP_ZK_ADDRS="+strings.Join(e.Addrs(), ","))
}

// loseLeader sells under strategy, whose lock is on e, kills e's leader
// mid-burst, and checks the sale; once the killed member is back, it
// sells a new SKU.
func loseLeader(t *testing.T, strategy string, e *testinfra.Ensemble, ensemble string) {
	t.Helper()
	s := newSale(t, strategy, testinfra.StartRedis(t).Addr(), ensemble, "SHOP_LOCK_TTL=10s", "SHOP_REQUEST_TIMEOUT=4s")
	s.shape = &electionShape
	sku := "el-" + strategy
	res := s.outage(t, sku, func() {
		killed, election := e.KillLeader()
		t.Logf("killed the leader %s; a new one was elected in %v", killed.Addr(), election.Round(time.Millisecond))
	})
	if share := float64(res.busyBuyers) / float64(electionShape.buyers); share > electionBusyShare {
		t.Errorf("%d of %d buyers (%.0f%%) were answered 503 during the election; want at most %.0f%%",
			res.busyBuyers, electionShape.buyers, 100*share, 100*electionBusyShare)
	}
	e.Restore()
	s.sellExactly(t, sku+"-after")
}
