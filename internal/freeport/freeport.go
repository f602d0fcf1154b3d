// Package freeport chooses the loopback ports that the servers started by
// the tests and lessons listen on: every such port is chosen here.
//
// It chooses them below the kernel's ephemeral range, which outgoing
// connections draw from: a port chosen there may be taken by one of them
// before the server binds it. Each process walks the ports from
// a random start, since test binaries of several packages choose at once,
// and hands a port out only after binding it.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
)

// MaxOffset bounds the offsets Addr checks: a Redis Cluster node's bus
// port is its port plus 10,000.
const MaxOffset = 10_000

// first is the lowest port handed out. Ports come from [first,
// first+MaxOffset), and their offsets fall in the MaxOffset ports above,
// which end where the ephemeral range begins: no handed-out port is
// another's port plus an offset.
var first = sync.OnceValues(func() (int, error) {
	low := 32768 // Linux's default, for systems without /proc
	const setting = "/proc/sys/net/ipv4/ip_local_port_range"
	if b, err := os.ReadFile(setting); err == nil {
		if _, err := fmt.Sscan(string(b), &low); err != nil {
			return 0, fmt.Errorf("freeport: %s: %w", setting, err)
		}
	}
	if low-2*MaxOffset < 1024 {
		return 0, fmt.Errorf("freeport: the ephemeral ports start at %d (%s): want %d ports below them", low, setting, 2*MaxOffset)
	}
	return low - 2*MaxOffset, nil
})

var (
	start = rand.IntN(MaxOffset) // where this process begins, from first
	tried atomic.Int64           // ports this process handed out or found taken
)

// Addr returns a loopback address whose port, and that port plus each of
// offsets (1 to MaxOffset), were free a moment ago and lie below the
// ephemeral range. The process does not hand the port out again while it
// has others to give, so a test's server may stop and start on it.
func Addr(offsets ...int) (string, error) {
	for _, off := range offsets {
		if off < 1 || off > MaxOffset {
			return "", fmt.Errorf("freeport: offset %d: want 1 to %d", off, MaxOffset)
		}
	}
	lns, err := listen(offsets)
	closeAll(lns)
	if err != nil {
		return "", err
	}
	return lns[0].Addr().String(), nil
}

// Listen listens on a loopback port that Addr would give, for a server in
// this process.
func Listen() (net.Listener, error) {
	lns, err := listen(nil)
	if err != nil {
		return nil, err
	}
	return lns[0], nil
}

// listen listens on the next port that binds, with its offsets.
func listen(offsets []int) ([]net.Listener, error) {
	base, err := first()
	if err != nil {
		return nil, err
	}
	for range MaxOffset {
		p := base + (start+int(tried.Add(1)))%MaxOffset
		if lns, err := bind(p, offsets); err == nil {
			return lns, nil
		}
	}
	return nil, fmt.Errorf("freeport: no free port in %d-%d", base, base+MaxOffset-1)
}

// bind listens on port p and on p plus each of offsets, or on none.
func bind(p int, offsets []int) ([]net.Listener, error) {
	var lns []net.Listener
	for _, off := range append([]int{0}, offsets...) {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+off)))
		if err != nil {
			closeAll(lns)
			return nil, err
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}
