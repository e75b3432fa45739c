// Package dial is the one place where nodewatch opens client connections:
// to etcd (Etcd: key, serve, sim) and to the Curator (Curator: nodes,
// node). It exists so that every connection gets the same things, once:
//
//   - TLS and credentials (TLS, Credentials, CuratorTLS), read from PEM
//     files by one loader (LoadCertPool, LoadKeyPair, ReadPEM,
//     ReadCertificate; serve's reloadable ServerTLS uses it too);
//   - a failure explained in the terms of the user's flags ("the server
//     requires a client certificate …: give --cert FILE and --key FILE"),
//     and kept, so that "no etcd reachable … (last error: …)" says why
//     rather than that time ran out (Credentials.Explain). The flags are
//     data (Flags, File): the CLI names them, this package says when to
//     give them;
//   - keepalive pings (Keepalive), so that a connection that goes silent
//     is noticed and replaced, and the connections a watch can close when
//     it found them silent (Conns), and gRPC's own reconnects of a
//     connection backed off from 100ms to 5s with jitter
//     (Keepalive.DialOptions);
//   - what a watch tells the user of its connection (Outage): one line
//     when it is lost, in the user's words (Reason), one when it is back,
//     the attempts in between counted, and an unreachable endpoint said
//     to be one within a second of the start (Announce).
//
// Watching again after a broken stream is the callers' (they know when
// one broke), with package backoff's capped, jittered waits; they tell
// their Outage.
package dial

import (
	"time"

	"google.golang.org/grpc"
	gbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"
)

// Defaults of Keepalive. The time is the most often that both servers
// accept pings on an open stream: etcd's --grpc-keepalive-min-time is 5s
// (a client pinging more often is sent GOAWAY), the Metropolis Curator
// permits one every second. With them, a connection that goes silent is
// given up within 8s of its last byte.
const (
	DefaultKeepaliveTime    = 5 * time.Second
	DefaultKeepaliveTimeout = 3 * time.Second
)

// Keepalive says how a connection proves that it is alive: after Time
// without hearing from the server, the client pings it, and gives the
// connection up when Timeout passes without an answer. Zero fields take
// the defaults.
type Keepalive struct {
	Time, Timeout time.Duration
}

// OrDefaults returns k with zero fields set to the defaults.
func (k Keepalive) OrDefaults() Keepalive {
	if k.Time <= 0 {
		k.Time = DefaultKeepaliveTime
	}
	if k.Timeout <= 0 {
		k.Timeout = DefaultKeepaliveTimeout
	}
	return k
}

// Deadline is how long a connection or a watch may go without hearing
// from its server before it is given up: Time, then Timeout.
func (k Keepalive) Deadline() time.Duration {
	k = k.OrDefaults()
	return k.Time + k.Timeout
}

// DialOptions returns the gRPC options for k: pings as k says (grpc-go
// never pings more often than every 10s, whatever it is asked; nodewatch's
// own probes are what meet Time), also while no stream is open; a new
// connection that has not completed its handshake within Deadline is given
// up (gRPC's default waits 20s on a silent one); and reconnecting backs off
// from 100ms to at most 5s, with jitter (gRPC's default grows to 120s, so a
// long outage would delay the recovery by minutes).
func (k Keepalive) DialOptions() []grpc.DialOption {
	k = k.OrDefaults()
	return []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: k.Time, Timeout: k.Timeout, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           gbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: k.Deadline(),
		}),
	}
}
