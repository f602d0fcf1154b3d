package fault

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/testinfra"
)

// The election tests sell on three `shop serve` processes whose lock is
// on an ensemble of three, and kill its leader (SIGKILL) mid-burst; the
// two others elect a new one in about a second. A lock request waits
// through the election within the request's deadline, so few buyers are
// answered busy: at most electionBusyShare of them, on a machine whose
// pace leaves the deadline room for the election (loseLeader says how
// that is measured). The lease, SHOP_LOCK_TTL, is electionLockTTL, which
// an election does not use up; the request's deadline,
// SHOP_REQUEST_TIMEOUT, is electionDeadline, a second below the buyers'
// own. Nothing is oversold, every acknowledged order replays, and the
// same processes then sell a new SKU exactly.

// electionShape is an election test's burst: the buyers arrive over about
// a second, and the leader is killed once a tenth of the units are sold,
// so that most of them arrive during the election or soon after it. Four
// buyers a unit keep the queue behind the election within the deadline
// on a loaded machine: with eight, a run at a load that tripled the
// queue's drain time answered 151 of 400 buyers 503 at the deadline.
var electionShape = burstShape{units: 50, buyers: 200, arrival: 6 * time.Millisecond, faultAt: 5}

// electionBusyShare is the most buyers of a burst that an election of
// about a second may cost a 503.
const electionBusyShare = 0.10

// electionDeadline is SHOP_REQUEST_TIMEOUT in the election tests' shops:
// room for an election of up to a few seconds on a loaded machine, and for
// the queue it leaves, as the default (10s) leaves in production.
const electionDeadline = 8 * time.Second

// electionLockTTL is SHOP_LOCK_TTL in the election tests' shops.
const electionLockTTL = 10 * time.Second

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
//
// Which 503s the election is answerable for is measured, not assumed: a
// fixed share failed on a loaded machine, where a burst of 400 buyers
// for 50 units cost 250 to 370 of them a 503 in an election, and none in the
// same burst with no fault. An election stops the sale for about a
// second, and every buyer queued then waits that much longer; on a
// machine that already sells the burst near the deadline, that second
// tips the whole queue past it. So, just before the election, the same
// processes sell a burst of the same shape with no fault: its longest
// wait, from a buyer's first request to its final answer, is how long
// the queue is at the pace this machine sells now. A 503 comes before
// the request's deadline, a refusal, or at it, after the whole wait:
//
//   - A refusal is the election's on any machine: a lock that does not
//     wait through the election refuses at once (a ZooKeeper lock that did
//     had 30% of the buyers answered so).
//   - A 503 at the deadline is the election's when the calm burst's longest
//     wait plus the sale's stop fits the deadline: this machine's pace left
//     room for both. The stop is the election, or the longest time without
//     a sale in the burst when that is longer: the shops' clients find the
//     new leader after it is elected, later on a loaded machine. It does on a quiet machine, where an election costs
//     no buyer a 503, and it did at a load of 15 (longest calm waits of
//     1.4 to 2.2 s, elections of 1.1 to 1.9 s, and no 503). When it does
//     not fit, the queue that a stop of the lock server that long builds
//     outlasts the deadline at this pace, with or without an election, and
//     those answers are the machine's load's: the test logs them. With
//     four CPU burners beside that load, the calm burst's longest wait
//     alone was 6 to 9 s.
//
// At most electionBusyShare of the buyers may be answered 503 for the
// election. A lock left stuck after the election fails outage's check
// that the shops sell again soon after the servers serve again.
func loseLeader(t *testing.T, strategy string, e *testinfra.Ensemble, ensemble string) {
	t.Helper()
	s := newSale(t, strategy, testinfra.StartRedis(t).Addr(), ensemble, "SHOP_LOCK_TTL="+electionLockTTL.String(), "SHOP_REQUEST_TIMEOUT="+electionDeadline.String())
	s.shape, s.lockTTL, s.deadline = &electionShape, electionLockTTL, electionDeadline
	sku := "el-" + strategy
	calm := s.burst(t, sku+"-calm", nil)
	s.recovered(t, sku+"-calm", calm)
	queue := longestWait(s.Rec.Ops())
	var election time.Duration
	res := s.outage(t, sku, func() {
		var killed *testinfra.Server
		killed, election = e.KillLeader()
		t.Logf("killed the leader %s; a new one was elected in %v", killed.Addr(), election.Round(time.Millisecond))
	})
	stop := max(election, res.longestWithoutSales())
	refused, timedOut := answeredBusy(s.Rec.Ops())
	t.Logf("answered 503: %d buyers in the calm burst, whose longest wait was %v; in the election's burst, %d refused before their deadline, %d at it; the sale stopped for %v",
		calm.busyBuyers, queue.Round(time.Millisecond), len(refused), len(timedOut), stop.Round(time.Millisecond))
	byElection := len(refused)
	if queue+stop < electionDeadline {
		byElection += len(timedOut)
	} else {
		t.Logf("the calm burst's longest wait and the sale's stop exceed the %v deadline: the %d answered 503 at it are this machine's load's", electionDeadline, len(timedOut))
	}
	if share := float64(byElection) / float64(electionShape.buyers); share > electionBusyShare {
		t.Errorf("%d of %d buyers (%.0f%%) were answered 503 for the election; want at most %.0f%%",
			byElection, electionShape.buyers, 100*share, 100*electionBusyShare)
	}
	e.Restore()
	s.sellExactly(t, sku+"-after")
}

// longestWait is the longest any buyer of a burst's history waited, from
// its first order request to its final answer (201 or sold out).
func longestWait(ops []history.Op) time.Duration {
	first, final := map[string]int64{}, map[string]int64{}
	for _, op := range ops {
		if op.Kind != history.Order {
			continue
		}
		if at, ok := first[op.User]; !ok || op.Call < at {
			first[op.User] = op.Call
		}
		if at, ok := final[op.User]; (op.Answer == history.Ordered || op.Answer == history.SoldOut) && (!ok || op.Return < at) {
			final[op.User] = op.Return
		}
	}
	var longest time.Duration
	for user, at := range final {
		longest = max(longest, time.Duration(at-first[user]))
	}
	return longest
}

// answeredBusy returns the buyers of a burst's history answered 503 at
// least once: those refused before the request's deadline at least once,
// and the others, answered 503 only at it.
func answeredBusy(ops []history.Op) (refused, timedOut []string) {
	early, late := map[string]bool{}, map[string]bool{}
	for _, op := range ops {
		if op.Kind != history.Order || op.Answer != history.Busy {
			continue
		}
		if time.Duration(op.Return-op.Call) < electionDeadline {
			early[op.User] = true
		} else {
			late[op.User] = true
		}
	}
	for user := range late {
		if !early[user] {
			timedOut = append(timedOut, user)
		}
	}
	return slices.Sorted(maps.Keys(early)), timedOut
}
