package server

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// What the logs say about streams. Every line about a stream carries its
// id (stream) and its peer (peer: the client's address, that of the
// connection it came over, as "connection closed" names it); ids count
// from 1 in the order streams were opened, for the life of the process.
// Openings and endings are logged at info; each event a Watch stream
// sends, at debug. Bad requests are logged rarely (see rareLog): a client
// can send as many as it likes.

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
// peer's address, which is the connection's in "connection closed".
func connAttrs(ctx context.Context) []any {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return []any{slog.String("peer", p.Addr.String())}
	}
	return nil
}
