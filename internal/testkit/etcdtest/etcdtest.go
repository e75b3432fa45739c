// Package etcdtest gives tests a real etcd: an embedded server in a
// temporary directory, clients for it, and a TCP proxy that can cut a
// client off and let it back, so reconnects and compactions can be
// provoked on purpose.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nodewatch/nodewatch/internal/embedetcd"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// Start starts an embedded etcd that lives as long as the test and
// returns its client URL.
func Start(t testing.TB) string {
	t.Helper()
	s, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.Endpoint
}

// StartTLS starts an embedded etcd that serves clients TLS only, as tls
// says, for as long as the test; it returns its https:// client URL.
func StartTLS(t testing.TB, tls embedetcd.TLS) string {
	t.Helper()
	s, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir(), TLS: &tls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.Endpoint
}

// StartWith starts an embedded etcd as Start does, puts kv (a key, its
// value, the next key, …) in that order, and returns its client URL and a
// client for it (see Client).
func StartWith(t testing.TB, kv ...string) (string, *clientv3.Client) {
	t.Helper()
	if len(kv)%2 != 0 {
		t.Fatalf("StartWith: key %q has no value", kv[len(kv)-1])
	}
	url := Start(t)
	c := Client(t, url)
	for i := 0; i < len(kv); i += 2 {
		Put(t, c, kv[i], kv[i+1])
	}
	return url, c
}

// Client returns a client for endpoint (several: comma-separated), closed
// when the test ends.
func Client(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoint, ","), DialTimeout: testkit.Timeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Put writes key=value and returns the new revision.
func Put(t testing.TB, c *clientv3.Client, key, value string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	resp, err := c.Put(ctx, key, value)
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return resp.Header.Revision
}

// Delete deletes key and returns the new revision.
func Delete(t testing.TB, c *clientv3.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	resp, err := c.Delete(ctx, key)
	if err != nil {
		t.Fatalf("delete %q: %v", key, err)
	}
	return resp.Header.Revision
}

// PutRetrying puts key=value, retrying while a cluster elects a leader,
// and returns the new revision.
func PutRetrying(t testing.TB, c *clientv3.Client, key, value string) int64 {
	t.Helper()
	var rev int64
	err := testkit.Poll(context.Background(), testkit.Timeout, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := c.Put(ctx, key, value)
		if err != nil {
			return false, err
		}
		rev = resp.Header.Revision
		return true, nil
	})
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return rev
}

// Compact compacts the history up to rev and waits until it is gone.
func Compact(t testing.TB, c *clientv3.Client, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact at rev %d: %v", rev, err)
	}
}

// EnableAuth creates the root user with password rootPassword and turns
// authentication on; c keeps working as it was until it reconnects.
func EnableAuth(t testing.TB, c *clientv3.Client, rootPassword string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if _, err := c.UserAdd(ctx, "root", rootPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
}

// Proxy forwards TCP connections from a loopback address to an etcd
// client URL. Cut closes every connection, and connections made after it
// are held, unanswered, until Restore forwards them: what a network
// partition that drops packets looks like to a client. A client that
// reconnects while cut gets through as soon as Restore is called, not at
// its next attempt after a backoff that grew with the length of the cut
// (which depends on how loaded the machine is).
type Proxy struct {
	// Endpoint is the URL clients should dial instead of the target.
	Endpoint string

	target string
	l      net.Listener
	wg     sync.WaitGroup // accept loop and connection pumps

	mu    sync.Mutex // guards cut, conns and held
	cut   bool
	conns map[net.Conn]struct{}
	held  []net.Conn // accepted while cut, forwarded by Restore
}

// NewProxy starts a proxy in front of endpoint (http://host:port); it is
// closed when the test ends.
func NewProxy(t testing.TB, endpoint string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{
		Endpoint: "http://" + l.Addr().String(),
		target:   endpoint[len("http://"):],
		l:        l,
		conns:    map[net.Conn]struct{}{},
	}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		l.Close()
		p.Cut()
		p.wg.Wait()
		p.Cut() // what the accept loop held after the first
	})
	return p
}

// Cut closes all proxied connections, and those held, and holds new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	for _, c := range p.held {
		c.Close()
	}
	p.held = nil
}

// Restore forwards the connections held since Cut, and new ones.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for _, c := range p.held {
		p.forward(c)
	}
	p.held = nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.held = append(p.held, in)
		} else {
			p.forward(in)
		}
		p.mu.Unlock()
	}
}

// forward connects in to the target; p.mu must be held.
func (p *Proxy) forward(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		in.Close()
		return
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.wg.Add(2)
	go p.pump(in, out)
	go p.pump(out, in)
}

func (p *Proxy) pump(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cluster is a real multi-member etcd cluster, all members embedded in
// the test process, for tests where failover is the point.
type Cluster struct {
	// Endpoints are the members' client URLs, in member order.
	Endpoints []string

	t       testing.TB
	configs []embedetcd.Config
	mu      sync.Mutex // guards servers
	servers []*embedetcd.Server
}

// StartCluster starts an n-member cluster that lives as long as the test.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, servers: make([]*embedetcd.Server, n)}
	// A killed member restarts on its own addresses, which must still be
	// free then. On 127.0.0.1 the kernel hands its ports to anyone asking
	// for a free one (other tests, outgoing connections); a loopback
	// address of the cluster's own keeps them out.
	host := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
	var initial []string
	for i := 0; i < n; i++ {
		client, err := embedetcd.FreeAddrOn(host)
		if err != nil {
			t.Fatal(err)
		}
		peer, err := embedetcd.FreeAddrOn(host)
		if err != nil {
			t.Fatal(err)
		}
		name := "m" + string(rune('0'+i))
		c.configs = append(c.configs, embedetcd.Config{Dir: t.TempDir(), ClientAddr: client, PeerAddr: peer, Name: name})
		c.Endpoints = append(c.Endpoints, "http://"+client)
		initial = append(initial, name+"=http://"+peer)
	}
	errs := make(chan error, n)
	for i := range c.configs {
		c.configs[i].InitialCluster = strings.Join(initial, ",")
		go func(i int) { errs <- c.start(i) }(i)
	}
	for range c.configs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := range c.servers {
			c.Kill(i)
		}
	})
	return c
}

func (c *Cluster) start(i int) error {
	s, err := embedetcd.Start(c.configs[i])
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.servers[i] = s
	return nil
}

// Kill stops member i as a crash would (a no-op if it is stopped). It
// takes up to etcd's request timeout (~7s) while clients hold watches on
// the member: etcd gives open streams that long to finish.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Kill()
	}
}

// Restart starts member i again on its data and addresses; the other
// members must have a quorum. An address still in use (the killed member's
// sockets closing, a stranger) is tried again for up to testkit.Timeout.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	err := testkit.Poll(context.Background(), testkit.Timeout, func() (bool, error) {
		err := c.start(i)
		return !errors.Is(err, syscall.EADDRINUSE), err
	})
	if err != nil {
		c.t.Fatal(err)
	}
}
