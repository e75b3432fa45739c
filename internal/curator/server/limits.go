package server

import (
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Defaults for Limits, as `nodewatch serve` uses them.
const (
	// DefaultMaxStreams: an idle Watch stream costs about 12 KiB (its
	// goroutine's stack, 8 KiB, and the state gRPC and its queue keep;
	// measured with thousands of idle streams open on one serve), since
	// every stream is sent the same encoded backlog and change events,
	// not copies of its own. 16,384 streams cost about 200 MiB, which a
	// server beside etcd can afford, with room beyond the 10,000 a
	// replica is meant to serve.
	DefaultMaxStreams = 16384
	// DefaultMaxStreamsPerConn lets 10,000 streams share 10 connections
	// (a proxy or a harness multiplexing its clients' streams), while one
	// connection cannot take more than a sixteenth of DefaultMaxStreams.
	// It is above the lowest limit HTTP/2 recommends, 100 (RFC 9113,
	// section 6.5.2), so a tool that watches each of many nodes on its
	// own stream over one connection keeps working.
	DefaultMaxStreamsPerConn = 1024
	// DefaultMaxConns lets every one of DefaultMaxStreams streams come
	// over a connection of its own, as it does when each client is a
	// `nodes` process with its one Watch. A connection costs gRPC's
	// buffers for it and three goroutines, streams or not: about 50 KiB
	// of heap and stacks, 22 KiB of it resident (measured with 16,384
	// idle connections open on one serve: 790 MiB held, 350 MiB
	// resident). That is a bound on what strangers can make a server
	// hold, not a size to run at.
	DefaultMaxConns = DefaultMaxStreams
	// DefaultIdleTimeout closes a connection that has had no stream open
	// for five minutes: a client that forgot its connection gives its
	// place back. A client that has a stream open is never idle; a gRPC
	// client whose connection was closed this way opens a new one for its
	// next call, without an error.
	DefaultIdleTimeout = 5 * time.Minute
)

// MaxRecvMsgSize is the largest request a Server accepts (gRPC's default
// is 4 MiB). A WatchRequest names at most one node id, tens of bytes; 16
// KiB leaves room for requests with a filter expression and keeps what a
// client can make the server buffer small (gRPC allocates a message's
// announced size before it reads it). A larger request fails with
// codes.ResourceExhausted.
const MaxRecvMsgSize = 16 << 10

// MaxHeaderListSize is the largest header list (a request's metadata,
// uncompressed, as HTTP/2 counts it) a Server accepts; gRPC's default is
// 16 MiB. The Curator's clients send a few hundred bytes (the method, the
// authority, a deadline); 64 KiB leaves room for a token or a trace
// context. gRPC announces it to clients (HTTP/2
// SETTINGS_MAX_HEADER_LIST_SIZE): a gRPC client fails a call past it
// before it sends anything (codes.Internal). A stream that comes anyway is
// reset (FRAME_SIZE_ERROR), or its connection closed when more of its
// headers follow, before it reaches the server (which counts neither:
// gRPC has no hook for it).
const MaxHeaderListSize = 64 << 10

// Keepalive, as the Metropolis Curator has it: clients may ping every
// second, even without a stream open; a connection quiet for
// KeepaliveTime is pinged, and closed if the ping is not answered within
// KeepaliveTimeout, so that a client that vanished (power loss, a network
// partition) gives up its streams within a minute.
const (
	KeepaliveMinTime = time.Second
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 20 * time.Second
)

// Limits bound what clients can take of a gRPC server, so that one client
// cannot exhaust it. Zero fields mean no limit.
type Limits struct {
	// MaxStreams is the number of streaming RPCs (Watch,
	// GetCurrentLeader, …) open at once over all connections. Past it a
	// new one fails at once with codes.ResourceExhausted, with a message
	// naming the limit; it is counted from when its handler starts until
	// it returns.
	MaxStreams int
	// MaxStreamsPerConn is the number of streams one connection may have
	// open at once: gRPC announces it to clients (HTTP/2
	// SETTINGS_MAX_CONCURRENT_STREAMS). A gRPC client queues the streams
	// past it until one of its streams ends (or the call's context does);
	// a client that opens one anyway has it reset (REFUSED_STREAM, which
	// gRPC clients see as codes.Unavailable).
	MaxStreamsPerConn uint32
	// IdleTimeout closes a connection once it has had no stream open for
	// that long (since it was opened, or since its last stream ended):
	// gRPC sends it a GOAWAY ("max_idle"), which a gRPC client takes as a
	// cue to connect again for its next call, and closes it.
	IdleTimeout time.Duration
}

// ServerOptions returns the grpc.ServerOptions that enforce l, together
// with MaxRecvMsgSize, MaxHeaderListSize and the keepalive above: a
// client that pings more often than every KeepaliveMinTime (three times
// in a row) is sent a GOAWAY ("too_many_pings") and disconnected. Each call returns a counter
// of open streams of its own: give the options to one grpc.Server. m, if
// not nil, counts the streams refused at the limit and those open.
func (l Limits) ServerOptions(m *Metrics) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.MaxHeaderListSize(MaxHeaderListSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:              KeepaliveTime,
			Timeout:           KeepaliveTimeout,
			MaxConnectionIdle: l.IdleTimeout, // 0: never, as gRPC has it
		}),
	}
	if l.MaxStreamsPerConn > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(l.MaxStreamsPerConn))
	}
	if l.MaxStreams > 0 {
		c := &streamCounter{max: int64(l.MaxStreams), m: m}
		opts = append(opts, grpc.ChainStreamInterceptor(c.intercept))
	}
	if m != nil {
		opts = append(opts, grpc.ChainStreamInterceptor(m.intercept))
	}
	return opts
}

// streamCounter counts the streams open on one grpc.Server; its
// interceptor runs concurrently, once per stream.
type streamCounter struct {
	max  int64
	m    *Metrics
	open atomic.Int64
}

func (c *streamCounter) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	defer c.open.Add(-1)
	if c.open.Add(1) > c.max {
		c.m.refused(refusedLimit)
		return status.Errorf(codes.ResourceExhausted,
			"curator server: at its limit of %d open streams over all connections; try again later", c.max)
	}
	return handler(srv, ss)
}
