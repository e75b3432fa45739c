package dial

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/nodewatch/nodewatch/internal/quietio"
)

// Conns keeps the connections that a set of transport credentials
// secured, with the time each last read something, so that a watch that
// found its server silent can close the connections that went silent with
// it. gRPC would keep such a connection (and send the next stream over
// it) until its own keepalive gives up, which grpc-go never lets be
// sooner than 10s of silence plus the ping's timeout; once it is closed,
// gRPC connects again at once. Its methods are safe for concurrent use.
type Conns struct {
	mu    sync.Mutex // guards conns
	conns map[*trackedConn]struct{}
}

// NewConns returns an empty Conns.
func NewConns() *Conns { return &Conns{conns: map[*trackedConn]struct{}{}} }

// Track returns creds, with every connection they secure kept in c.
func (c *Conns) Track(creds credentials.TransportCredentials) credentials.TransportCredentials {
	return &tracking{TransportCredentials: creds, conns: c}
}

// track is Track, or creds themselves when c is nil.
func (c *Conns) track(creds credentials.TransportCredentials) credentials.TransportCredentials {
	if c == nil {
		return creds
	}
	return c.Track(creds)
}

// CloseSilent closes every connection that has read nothing for at least
// d, and returns how many it closed.
func (c *Conns) CloseSilent(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for tc := range c.conns {
		if time.Since(time.Unix(0, tc.lastRead.Load())) >= d {
			tc.Conn.Close()
			delete(c.conns, tc)
			n++
		}
	}
	return n
}

// Len returns the number of connections open.
func (c *Conns) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

func (c *Conns) add(tc *trackedConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns[tc] = struct{}{}
}

func (c *Conns) remove(tc *trackedConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.conns, tc)
}

// tracking is transport credentials that keep their connections in conns.
type tracking struct {
	credentials.TransportCredentials
	conns *Conns
}

// ClientHandshake tracks the connection from before its handshake, so
// that one whose handshake gets no answer can be closed too.
func (t *tracking) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tr := &trackedConn{Conn: quietio.Conn(raw), conns: t.conns}
	tr.lastRead.Store(time.Now().UnixNano())
	t.conns.add(tr)
	conn, info, err := t.TransportCredentials.ClientHandshake(ctx, authority, tr)
	if err != nil {
		tr.Close()
		return nil, nil, err
	}
	if conn == net.Conn(tr) {
		return tr, info, nil // plaintext: the handshake returned tr as it is
	}
	// TLS: the conn wraps tr, which keeps being tracked and read.
	return &closing{Conn: conn, tr: tr}, info, nil
}

// closing is a connection over a tracked one that untracks it on Close.
type closing struct {
	net.Conn
	tr *trackedConn
}

func (c *closing) Close() error {
	err := c.Conn.Close()
	c.tr.Close()
	return err
}

func (t *tracking) Clone() credentials.TransportCredentials {
	return &tracking{TransportCredentials: t.TransportCredentials.Clone(), conns: t.conns}
}

// trackedConn is a connection that notes when it last read something.
type trackedConn struct {
	net.Conn
	conns    *Conns
	lastRead atomic.Int64 // unix nanoseconds
	once     sync.Once
}

func (tc *trackedConn) Read(b []byte) (int, error) {
	n, err := tc.Conn.Read(b)
	if n > 0 {
		tc.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

func (tc *trackedConn) Close() error {
	tc.once.Do(func() { tc.conns.remove(tc) })
	return tc.Conn.Close()
}
