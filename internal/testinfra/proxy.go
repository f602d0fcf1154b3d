package testinfra

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy between one client and a real server, for the
// faults that happen to a client rather than to the server. Everything the
// client sends through it stands for one process: Pause freezes that
// process's traffic, as SIGSTOP or a long GC pause would, while the server
// and every other client carry on; Cut kills it, as a crash of its machine
// would, without the goodbye (QUIT, closeSession) a clean exit sends.
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex
	target  string
	running chan struct{} // closed while traffic flows; open while paused
	cut     bool
	delay   time.Duration // before a connection accepted reaches target
	conns   []net.Conn
}

// StartProxy listens on a free loopback port and forwards every connection
// to target. It is closed at cleanup.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln := listen(t)
	p := &Proxy{target: target, ln: ln, running: make(chan struct{})}
	close(p.running)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
	})
	go p.accept()
	return p
}

// Addr returns the address clients dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pause holds every byte in both directions until Resume. Connections stay
// open; new ones are accepted and held too.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.running:
		p.running = make(chan struct{})
	default: // paused already
	}
}

// Resume lets the held bytes and all later ones through.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.running:
	default:
		close(p.running)
	}
}

// Retarget sends the connections accepted from now on to target, as an
// endpoint (a VIP, a proxy) moved to a new primary does; those open stay
// where they are.
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// Delay holds each connection accepted from now on for d before it
// reaches the server, as a loaded or distant endpoint does: the client's
// dial succeeds, and the server's greeting comes d later. Traffic on
// connections already open is not delayed.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Cut closes every connection, abruptly, and refuses new ones from now on.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeOpen()
	select {
	case <-p.running:
	default:
		close(p.running) // unblock the copiers, which then find their conns closed
	}
}

// Drop closes every connection the proxy carries, and goes on
// accepting: an endpoint that moves with a failover (see Retarget) closes
// what it carried to the old server.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeOpen()
}

// closeOpen closes every connection the proxy carries; p.mu is held.
func (p *Proxy) closeOpen() {
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Mend accepts and forwards new connections again after Cut, as a
// server back from a restart does.
func (p *Proxy) Mend() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed at cleanup
		}
		go p.serve(client)
	}
}

func (p *Proxy) serve(client net.Conn) {
	p.mu.Lock()
	target, delay := p.target, p.delay
	p.mu.Unlock()
	time.Sleep(delay)
	server, err := net.Dial("tcp", target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns = append(p.conns, client, server)
	p.mu.Unlock()
	go p.copy(server, client)
	go p.copy(client, server)
}

// copy forwards src to dst, holding each chunk while the proxy is paused.
// When either side ends, it closes both.
func (p *Proxy) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			running := p.running
			p.mu.Unlock()
			<-running
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or a connection closed by Cut or by either end
		}
	}
}
