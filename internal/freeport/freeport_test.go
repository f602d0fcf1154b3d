package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrPassesOverTakenOffset: a port whose port plus an offset is
// taken, as a Redis Cluster node's bus port may be, is not handed out,
// and what is lies below the ephemeral range. The package's tests run one
// at a time, so the port this test takes is the next one's offset.
func TestAddrPassesOverTakenOffset(t *testing.T) {
	base, err := first()
	if err != nil {
		t.Fatal(err)
	}
	next := base + (start+int(tried.Load())+1)%MaxOffset
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(next+MaxOffset)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	addr, err := Addr(MaxOffset)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	if p == next {
		t.Errorf("Addr handed out %d, whose port %d is taken", p, next+MaxOffset)
	}
	if p < base || p >= base+MaxOffset {
		t.Errorf("Addr handed out %d: want %d to %d, below the ephemeral range", p, base, base+MaxOffset-1)
	}
}
