package server

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// listener is Serve's listener. It keeps at most max connections open
// (0: no limit): past it, it closes a new connection as soon as it has
// accepted it, counts it (connections_refused_total) and says so at warn,
// rarely (see rareLog). It logs each connection it keeps once, at debug,
// when the connection closes (a connection costs a client nothing to
// open: two lines at info each made the log a way to fill a disk). And it
// tells when it is closed itself.
//
// gRPC calls Accept from one goroutine, and Close on its connections from
// any.
type listener struct {
	net.Listener
	log      *slog.Logger
	m        *Metrics
	max      int64
	open     atomic.Int64 // connections accepted and not yet closed
	refusals rareLog      // connections closed at accept
	once     sync.Once
	closed   chan struct{} // closed by Close
}

// newListener returns l, keeping at most max connections, and logging
// connections refused at most once per every.
func newListener(l net.Listener, max int, every time.Duration, log *slog.Logger, m *Metrics) *listener {
	return &listener{Listener: l, log: log, m: m, max: int64(max), refusals: rareLog{every: every}, closed: make(chan struct{})}
}

// Accept returns the next connection that is within the limit; those past
// it are closed here, and never reach gRPC.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			c.Close()
			l.m.connRefused()
			l.refusals.log(l.log, slog.LevelWarn, "connection refused: at the limit of open connections",
				"max_connections", l.max, "peer", c.RemoteAddr().String())
			continue
		}
		l.m.connsOpen(1)
		return &conn{Conn: c, l: l, opened: time.Now()}, nil
	}
}

func (l *listener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.closed) })
	return err
}

// conn gives its place back, and logs, when it is first closed.
type conn struct {
	net.Conn
	l      *listener
	opened time.Time
	once   sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.m.connsOpen(-1)
		c.l.log.Debug("connection closed", "peer", c.RemoteAddr().String(), "duration", time.Since(c.opened).Round(time.Millisecond))
	})
	return err
}
