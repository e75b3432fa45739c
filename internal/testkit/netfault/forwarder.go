// Package netfault is test scaffolding: a TCP forwarder that tests and
// the fault suite put between a client and its server to make the network
// fail the ways it really does: a connection that goes silent (every byte
// dropped, both ways, with no FIN and no RST: a load balancer or NAT that
// forgot the flow, a paused VM, a frozen process), a peer that cannot be
// reached at all (new connections accepted and then never answered), a
// peer held (connections accepted, forwarded only later), and a cut (every
// connection closed).
//
// A silent connection is the fault that nothing but a liveness check
// notices: the kernel on either side keeps the connection open, writes
// succeed, and reads block for ever.
package netfault

import (
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Forwarder forwards the TCP connections it accepts to a target address.
// Its methods are safe for concurrent use.
type Forwarder struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every pump

	mu      sync.Mutex // guards the fields below
	conns   map[*link]struct{}
	blocked bool       // new connections are accepted and then silent
	holding bool       // new connections are accepted and then held
	held    []net.Conn // accepted while holding, not forwarded yet
	closed  bool
}

// link is one forwarded connection: the client's side and the target's.
type link struct {
	in, out net.Conn
	silent  atomic.Bool
}

// Listen starts a forwarder on a free port of host (e.g. "127.0.0.1") to
// target (host:port). The caller must Close it.
func Listen(host, target string) (*Forwarder, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	f := &Forwarder{l: l, target: target, conns: map[*link]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// Addr is the address (host:port) clients dial instead of the target.
func (f *Forwarder) Addr() string { return f.l.Addr().String() }

// Silence makes every open connection silent: from now on the bytes
// either side sends are read and dropped, and nothing is closed. New
// connections are forwarded as usual: the flow was forgotten, the path
// still works.
func (f *Forwarder) Silence() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.conns {
		l.silent.Store(true)
	}
}

// Block is Silence for every connection, open or new: new connections are
// accepted and then silent too, until Heal. The target is unreachable
// without anything saying so: a partition that drops packets.
func (f *Forwarder) Block() {
	f.mu.Lock()
	f.blocked = true
	f.mu.Unlock()
	f.Silence()
}

// Heal forwards new connections again. Connections that went silent stay
// silent (their ends must notice and give up on them).
func (f *Forwarder) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = false
}

// Cut closes every open connection (both ends see it end at once).
func (f *Forwarder) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.conns {
		l.in.Close()
		l.out.Close()
	}
}

// Hold cuts every connection, open or held, and holds new ones until
// Release: accepted, then neither forwarded nor answered, as in a
// partition that drops packets. Unlike Block, a client that reconnects
// while held gets through as soon as Release is called, not at its next
// attempt after a backoff that grew with the length of the cut (which
// depends on how loaded the machine is).
func (f *Forwarder) Hold() {
	closeAll(f.hold(true))
	f.Cut()
}

// Release forwards the connections held since Hold, and new ones.
func (f *Forwarder) Release() {
	for _, in := range f.hold(false) {
		f.forward(in)
	}
}

// hold says whether new connections are to be held, and returns those
// held so far, which are no longer.
func (f *Forwarder) hold(on bool) []net.Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holding = on
	held := f.held
	f.held = nil
	return held
}

// Open returns the number of connections open through f.
func (f *Forwarder) Open() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// Close stops accepting, closes every connection and waits for its
// goroutines.
func (f *Forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.l.Close()
	closeAll(f.hold(false))
	f.Cut()
	f.wg.Wait()
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

func (f *Forwarder) accept() {
	defer f.wg.Done()
	for {
		in, err := f.l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		hold := f.holding && !f.closed
		if hold {
			f.held = append(f.held, in)
		}
		f.mu.Unlock()
		if !hold && !f.forward(in) {
			return
		}
	}
}

// forward connects in to the target and pumps both ways; it reports false
// if f is closed.
func (f *Forwarder) forward(in net.Conn) bool {
	out, err := net.Dial("tcp", f.target)
	if err != nil {
		in.Close()
		return true
	}
	l := &link{in: in, out: out}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		in.Close()
		out.Close()
		return false
	}
	l.silent.Store(f.blocked)
	f.conns[l] = struct{}{}
	f.wg.Add(2)
	go f.pump(l, out, in)
	go f.pump(l, in, out)
	return true
}

// pump copies src to dst until either ends, dropping what it reads while
// the link is silent; then it closes both (the other pump ends too).
func (f *Forwarder) pump(l *link, dst, src net.Conn) {
	defer f.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	f.mu.Lock()
	delete(f.conns, l)
	f.mu.Unlock()
}

// Start starts a forwarder on loopback to target (host:port, or a URL
// such as http://host:port) for a test, and closes it when the test ends.
func Start(t testing.TB, target string) *Forwarder {
	t.Helper()
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		target = u.Host
	}
	f, err := Listen("127.0.0.1", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}
