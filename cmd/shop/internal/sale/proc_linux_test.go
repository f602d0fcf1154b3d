package sale

import (
	"net"
	"os"
	"slices"
	"testing"
	"time"
)

func TestStatCPU(t *testing.T) {
	t.Parallel()
	// A command name may hold spaces and parentheses of its own.
	stat := "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 40 0 0 20 0 3 0 500 1000 200\n"
	if got, err := statCPU([]byte(stat)); err != nil || got != 2900*time.Millisecond {
		t.Errorf("statCPU = %v, %v; want 2.9s, utime 250 and stime 40 ticks", got, err)
	}
	for _, bad := range []string{"", "4242 (prog", "4242 (prog) S 1 2"} {
		if _, err := statCPU([]byte(bad)); err == nil {
			t.Errorf("statCPU(%q): no error", bad)
		}
	}
}

func TestListenInodes(t *testing.T) {
	t.Parallel()
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000   104        0 31337 1 0000000000000000 100 0 0 10 0
   1: 0100007F:18EB 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000   104        0 31338 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 4242 1 0000000000000000 100 0 0 10 0
`
	if got := listenInodes([]byte(table), 6379); !slices.Equal(got, []string{"31337"}) {
		t.Errorf("port 6379: %v, want the listening socket only, 31337", got)
	}
	if got := listenInodes([]byte(table), 3306); !slices.Equal(got, []string{"4242"}) {
		t.Errorf("port 3306: %v, want 4242", got)
	}
}

// TestListening finds this process by a port it listens on, and reads its
// CPU time.
func TestListening(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pids, err := listening(ln.Addr().String())
	if err != nil || !slices.Equal(pids, []int{os.Getpid()}) {
		t.Errorf("listening(%s) = %v, %v; want this process, %d", ln.Addr(), pids, err, os.Getpid())
	}
	if _, err := listening("192.0.2.1:3306"); err == nil {
		t.Error("a server on another machine was found here")
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if cpu, err := procCPU(os.Getpid()); err != nil || cpu > 0 {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("this process used no CPU time")
		}
		for i := 0; i < 1e7; i++ { // work, so that the count moves
			_ = i * i
		}
	}
}
