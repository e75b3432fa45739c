package server

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// What the logs say about connections and streams. Every line about a
// stream carries its id (stream) and its peer (peer: the client's address,
// that of the connection it came over, as "connection opened" names it);
// ids count from 1 in the order streams were opened, for the life of the
// process. Openings and endings are logged at info; each
// event a Watch stream sends, at debug.

// stream is one RPC as the server logs and counts it.
type stream struct {
	log    *slog.Logger
	debug  bool // log each event sent
	start  time.Time
	events int
	bytes  int
}

// openStream numbers a new stream of method, and returns what logs it.
func (s *Server) openStream(ctx context.Context, method string) *stream {
	attrs := []any{slog.Uint64("stream", s.streamIDs.Add(1)), slog.String("method", method)}
	attrs = append(attrs, connAttrs(ctx)...)
	log := s.log.With(attrs...)
	return &stream{log: log, debug: log.Enabled(ctx, slog.LevelDebug), start: time.Now()}
}

// refused logs a stream refused before it served anything.
func (st *stream) refused(m *Metrics, reason string, err error) {
	m.refused(reason)
	st.log.Info("stream refused", "reason", reason, "code", status.Code(err).String(), "error", status.Convert(err).Message())
}

// closed logs the end of a stream that was served, with the status it
// ended with.
func (st *stream) closed(err error) {
	args := []any{"code", status.Code(err).String(), "events", st.events, "bytes", st.bytes, "duration", time.Since(st.start).Round(time.Millisecond)}
	if err != nil {
		args = append(args, "error", status.Convert(err).Message())
	}
	st.log.Info("stream closed", args...)
}

// connAttrs are the attributes naming the connection ctx came over: the
// peer's address, which is the connection's in "connection opened".
func connAttrs(ctx context.Context) []any {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return []any{slog.String("peer", p.Addr.String())}
	}
	return nil
}

// listener is Serve's listener: it logs each connection's opening and
// closing at info, and tells when it is closed itself.
type listener struct {
	net.Listener
	log    *slog.Logger
	once   sync.Once
	closed chan struct{}
}

func newListener(l net.Listener, log *slog.Logger) *listener {
	return &listener{Listener: l, log: log, closed: make(chan struct{})}
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.log.Info("connection opened", "peer", c.RemoteAddr().String())
	return &conn{Conn: c, log: l.log}, nil
}

func (l *listener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.closed) })
	return err
}

// conn logs its closing once.
type conn struct {
	net.Conn
	log  *slog.Logger
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.log.Info("connection closed", "peer", c.RemoteAddr().String()) })
	return err
}
