//go:build linux

package faults

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/nodewatch/nodewatch/internal/testkit/netfault"
)

// peerNet carries the raft traffic between the members through one
// netfault.Forwarder per link (from member i to member j), so that a
// member can be cut off from its peers while its clients still reach it.
//
// etcd members reach a peer at the one URL the cluster agrees on, whoever
// dials; so each member advertises a switch of its own (a listener here),
// which finds out which member dialed (the process that owns the other end
// of the connection, read from /proc) and splices the connection to that
// link's forwarder. Its methods are safe across goroutines; close must be
// called.
type peerNet struct {
	switches []net.Listener          // by target member: what the member advertises
	links    [][]*netfault.Forwarder // [from][to], to the target's real peer address; nil on the diagonal
	wg       sync.WaitGroup          // accept loops and splices

	mu      sync.Mutex // guards pids, unknown, conns and blocked
	pids    []int      // member processes by index; 0 while none runs
	blocked map[*netfault.Forwarder]bool
	unknown int // connections whose dialer was not a member: closed
	conns   map[net.Conn]struct{}
}

// newPeerNet starts switches and links on host for members whose real
// peer addresses are peers.
func newPeerNet(host string, peers []string) (*peerNet, error) {
	p := &peerNet{pids: make([]int, len(peers)), conns: map[net.Conn]struct{}{}, blocked: map[*netfault.Forwarder]bool{}}
	for i := range peers {
		p.links = append(p.links, make([]*netfault.Forwarder, len(peers)))
		for j, target := range peers {
			if i == j {
				continue
			}
			f, err := netfault.Listen(host, target)
			if err != nil {
				p.close()
				return nil, err
			}
			p.links[i][j] = f
		}
	}
	for j := range peers {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			p.close()
			return nil, err
		}
		p.switches = append(p.switches, l)
		p.wg.Add(1)
		go p.accept(j, l)
	}
	return p, nil
}

// advertise returns the address member j advertises to its peers.
func (p *peerNet) advertise(j int) string { return p.switches[j].Addr().String() }

// setPid records the process of member i (0: none).
func (p *peerNet) setPid(i, pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pids[i] = pid
}

// isolate blocks every link to and from member i (open connections and
// new ones go silent); heal forwards new connections again.
func (p *peerNet) isolate(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for j := range p.links {
		if j != i {
			for _, f := range []*netfault.Forwarder{p.links[i][j], p.links[j][i]} {
				f.Block()
				p.blocked[f] = true
			}
		}
	}
}

// heal undoes isolate: new connections on every link are forwarded, and
// the connections that went silent are closed. (A partition that heals
// gives the old connections back, or they were reset meanwhile; etcd's
// members, left with silent ones, were seen not to give up on them within
// 30s, so the member stayed without a leader.)
func (p *peerNet) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for f := range p.blocked {
		f.Heal()
		f.Cut()
	}
	clear(p.blocked)
}

// Unknown returns how many peer connections came from no member (closed).
func (p *peerNet) Unknown() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unknown
}

func (p *peerNet) accept(j int, l net.Listener) {
	defer p.wg.Done()
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		pids := append([]int(nil), p.pids...)
		p.mu.Unlock()
		i := dialer(in, pids)
		if i < 0 || i == j {
			p.mu.Lock()
			p.unknown++
			p.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.links[i][j].Addr())
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.splice(in, out)
		go p.splice(out, in)
	}
}

// splice copies src to dst until either ends, then closes both.
func (p *peerNet) splice(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, src)
	delete(p.conns, dst)
	p.mu.Unlock()
}

// close stops the switches and the links and waits for their goroutines.
func (p *peerNet) close() {
	for _, l := range p.switches {
		l.Close()
	}
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	for _, fs := range p.links {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
}

// dialer returns the index in pids of the process that owns the other end
// of the accepted connection c (a loopback connection: its socket is in
// this network namespace), or -1.
func dialer(c net.Conn, pids []int) int {
	local, remote := c.RemoteAddr().String(), c.LocalAddr().String() // the dialer's view
	tcp, err := os.ReadFile("/proc/self/net/tcp")
	if err != nil {
		return -1
	}
	inode := ""
	for _, line := range strings.Split(string(tcp), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 10 {
			continue
		}
		l, ok1 := hexAddr(fs[1])
		r, ok2 := hexAddr(fs[2])
		if ok1 && ok2 && l == local && r == remote {
			inode = fs[9]
			break
		}
	}
	if inode == "" {
		return -1
	}
	want := "socket:[" + inode + "]"
	for i, pid := range pids {
		if pid == 0 {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == want {
				return i
			}
		}
	}
	return -1
}

// open returns the connections open through each link, [from][to].
func (p *peerNet) open() [][]int {
	out := make([][]int, len(p.links))
	for i, fs := range p.links {
		out[i] = make([]int, len(fs))
		for j, f := range fs {
			if f != nil {
				out[i][j] = f.Open()
			}
		}
	}
	return out
}
