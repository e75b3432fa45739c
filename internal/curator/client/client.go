// Package client is the source behind `nodewatch nodes` and `nodewatch node
// ID`: it turns a Curator Watch stream into flow batches, and owns
// everything the wire leaves to the client: following a non-leader to the
// leader, reconnecting with capped backoff, moving across endpoints, and
// handing over the full state again after a reconnect so that the follower
// prints only what changed meanwhile.
package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/nodewatch/nodewatch/internal/backoff"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/flow"
)

// Defaults for the Client's zero-valued fields.
const (
	DefaultDialTimeout = 5 * time.Second
	DefaultMaxBackoff  = 5 * time.Second
	DefaultSettle      = time.Second
)

// maxRecvSize lets a client read a backlog event holding one node larger
// than curator.MaxEventSize (the Curator only splits between nodes), and more.
const maxRecvSize = 64 << 20

// ErrUnavailable is returned (wrapped, naming the endpoints and the last
// error) by Client.Run when no Watch stream could be established within
// DialTimeout of Run's start. It is dial.ErrUnavailable. Once a stream has
// been established, Run never returns it: connection losses are retried
// for ever.
var ErrUnavailable = dial.ErrUnavailable

// Client is the source behind `nodewatch nodes` and `nodewatch node ID`:
// it follows the Curator's Watch stream and hands flow batches to a
// Sink, each Change holding a node id and, for upserts, the node as
// Object returns it.
//
// # Batches
//
// All nodes (NodeID ""; kind nodes_in_cluster): the backlog events, up to
// and including the one marked PROGRESS_LAST_BACKLOGGED, become one full
// batch (CauseInitial, or CauseResync after a reconnect; Synced); each
// later event becomes one CauseChange batch (nodes as upserts, tombstones
// as deletes).
//
// One node (NodeID set; kind node_in_cluster): the wire has no progress
// marker, and the server sends nothing at all while the node does not
// exist. So each stream's first full batch (CauseInitial, then
// CauseResync; Synced) is decided thus: if an event arrives within Settle
// of the stream's opening, the batch holds the node it carries; if none
// arrives, the node is taken not to exist and the batch is empty. Later
// events are CauseChange batches. After a reconnect the empty resync is
// what turns a deletion missed while disconnected into a `deleted` event.
// The cost of the rule: a server slower than Settle to send an existing
// node makes it look absent until it arrives (then `new`), and `--once`
// on a missing node takes Settle.
//
// # Faults
//
// When a stream breaks, Run waits with capped exponential backoff (100ms
// doubling up to MaxBackoff), moves to the next endpoint, watches again
// and hands over the full state (CauseResync), which the follower turns
// into differences. What it tells the user is a dial.Outage's: one line
// on Logf when a working stream is lost, one when a stream works again
// (how long the watch was blind, how many attempts failed); at the start,
// one line if no endpoint was reached within dial.Announce, and one when
// one is. Every failed attempt in between goes to Debugf only.
//
// A server answering codes.Unimplemented (a non-leader Metropolis node)
// is asked CuratorLocal.GetCurrentLeader, and the watch goes to the
// leader it names. InvalidArgument, PermissionDenied, Unauthenticated,
// NotFound, FailedPrecondition, OutOfRange and AlreadyExists end Run with
// an error wrapping the gRPC status (status.Code finds it); everything
// else (Unavailable, transport errors, a server that stops) is retried.
//
// A stream counts as established once it delivered an event, or, for one
// node, stayed open for Settle. Until the first one is, Run gives up with
// ErrUnavailable after DialTimeout.
//
// # Liveness
//
// A connection can go silent (every byte dropped, nothing closed) without
// either end noticing. So while a stream is quiet for Keepalive.Time, its
// connection is probed with CuratorLocal.GetCurrentLeader (every second
// until something answers); a stream that heard nothing, not even an
// answer to a probe, for Keepalive.Time + Keepalive.Timeout is given up as
// broken (a loss; reconnect as below). Each answer to a probe is handed
// over as a Confirmed batch, which prints nothing. gRPC's own keepalive
// pings (at most every 10s) back this up on every connection.
//
// # Health
//
// The Watch stream has no health; Management.GetNodes has. With
// HealthInterval set, a second connection (to the endpoints in turn,
// with the same credentials) calls GetNodes at the start and then every
// HealthInterval, and every node's object gets two more members: "health"
// (the enum's name, HEALTH_UNKNOWN for a node GetNodes did not report)
// and, when the server gives it, "time_since_heartbeat" (protobuf JSON,
// "1.500s"). The first full batch waits for the first answer. A node
// whose health changes is handed over again (CauseChange); one whose
// time_since_heartbeat alone changed is not, or every poll would change
// every node: its object keeps the time_since_heartbeat of the poll its
// health was last taken from. A server refusing the first GetNodes with
// Unimplemented or a fatal status ends Run with that error; no answer
// within DialTimeout of the start ends it with ErrUnavailable; once it
// has answered, every failure is logged and retried, and nodes keep
// their last health.
//
// A Client's fields must not change while Run runs.
type Client struct {
	// Endpoints are the Curator addresses (host:port) to try, in order.
	// Required.
	Endpoints []string
	// TLS secures the connections, to the endpoints and to the leaders
	// they name, and words their failures in the terms of the user's
	// flags; nil means plaintext. For a Metropolis cluster the chain is
	// verified against the cluster CA without a host-name check (see
	// dial.Curator).
	TLS *dial.TLS
	// DialOptions are added to every connection's options.
	DialOptions []grpc.DialOption
	// NodeID is the node to watch (node_in_cluster); "" watches every
	// node (nodes_in_cluster).
	NodeID string
	// Logf says when a working stream is lost and when one works again
	// (see "Faults" above), a redirect to a leader it did not name
	// before, and which nodes it skips. Nil discards.
	Logf dial.Logf
	// Debugf says every attempt that failed, and every leader redirect
	// (Logf says one to a leader not said before) (-v). Nil discards.
	Debugf dial.Logf
	// Listed, if set, is told how many nodes the initial listing (the
	// backlog of the first stream) has converted so far: a terminal's
	// progress meter. The listing ends with the Put of its full batch. It
	// may be called from several goroutines at once.
	Listed func(n int)
	// DialTimeout bounds the wait for the first established stream (see
	// ErrUnavailable); a connection to one endpoint may take at most its
	// share, DialTimeout / len(Endpoints), to become ready, before and
	// after. 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxBackoff caps the wait between reconnects; 0 means
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Settle is how long a node_in_cluster stream may stay silent before
	// the node is taken not to exist; 0 means DefaultSettle. It is
	// capped at half of DialTimeout.
	Settle time.Duration
	// HealthInterval, if positive, adds health to every node: see
	// "Health" above.
	HealthInterval time.Duration
	// Keepalive says how often a connection must prove that it is alive
	// (see "Liveness" above); zero fields take the defaults.
	Keepalive dial.Keepalive
	// ConfirmEvery, if positive and shorter than Keepalive.Time, is how
	// long a quiet stream waits before its connection is probed (for
	// --heartbeat).
	ConfirmEvery time.Duration
}

// Run watches until ctx ends or a fatal error occurs, putting batches into
// out; it closes nothing (out belongs to the caller). It blocks, and
// returns ctx.Err() when ctx ends, an error wrapping ErrUnavailable when no
// stream could be established within DialTimeout of the start, or an
// error wrapping the gRPC status a server refused the watch with (see
// Client). Concurrent Runs of one Client are independent of each other.
func (c *Client) Run(ctx context.Context, out flow.Sink) error {
	if len(c.Endpoints) == 0 {
		return errors.New("curator client: no endpoints configured")
	}
	if c.HealthInterval > 0 {
		return c.runWithHealth(ctx, out)
	}
	return c.run(ctx, out)
}

// run is Run without health.
func (c *Client) run(ctx context.Context, out flow.Sink) error {
	r := &clientRun{c: c, out: out, deadline: time.Now().Add(c.dialTimeout())}
	r.outage = &dial.Outage{Server: "curator", Endpoints: c.endpoints(), Deadline: c.dialTimeout(), Logf: c.Logf, Debugf: c.Debugf}
	r.outage.Begin()
	defer r.outage.Stop()
	var (
		bo      = backoff.Backoff{Max: c.maxBackoff()}
		lastErr error // the last failure before the first stream was established
	)
	for i := 0; ; i = (i + 1) % len(c.Endpoints) {
		target := c.Endpoints[i]
		before := r.established.Load()
		err := r.attempt(ctx, target)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fatal *fatalError
		if errors.As(err, &fatal) {
			return fmt.Errorf("curator %s: %w", target, err)
		}
		connected := r.established.Load() > 0
		if !connected {
			switch {
			case !errors.Is(err, errDialWindow):
				lastErr = fmt.Errorf("%s: %w", target, plain(err))
			case lastErr == nil:
				lastErr = fmt.Errorf("%s: no answer yet", target)
			} // else an endpoint that ran out of time keeps the last error that says why
			if errors.Is(err, errDialWindow) || !time.Now().Before(r.deadline) {
				return r.unavailable(lastErr)
			}
		}
		at := target
		if p := r.at.Load(); p != nil {
			at = *p // the leader target named
		}
		if r.established.Load() > before {
			bo.Reset() // this was a working stream: a fresh failure
			// Blind since the loss, or since a silent stream last heard.
			var since time.Time
			if errors.Is(err, errSilent) {
				since = time.Unix(0, r.heard.Load())
			}
			r.outage.Lost(at, plain(err), since)
		} else {
			r.outage.Retry(at, plain(err))
		}
		d := bo.Next()
		if !connected {
			d = min(d, time.Until(r.deadline))
		}
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
		if !connected && !time.Now().Before(r.deadline) {
			return r.unavailable(lastErr)
		}
	}
}

// endpoints names the Curator in messages: its endpoints.
func (c *Client) endpoints() string { return strings.Join(c.Endpoints, ",") }

func (c *Client) dialTimeout() time.Duration {
	if c.DialTimeout > 0 {
		return c.DialTimeout
	}
	return DefaultDialTimeout
}

// connectTimeout bounds the wait for one connection to become ready: a
// share of DialTimeout, so that an endpoint that does not answer at all
// leaves time to try the others.
func (c *Client) connectTimeout() time.Duration {
	return c.dialTimeout() / time.Duration(len(c.Endpoints))
}

func (c *Client) maxBackoff() time.Duration {
	if c.MaxBackoff > 0 {
		return c.MaxBackoff
	}
	return DefaultMaxBackoff
}

func (c *Client) settle() time.Duration {
	d := c.Settle
	if d <= 0 {
		d = DefaultSettle
	}
	return min(d, c.dialTimeout()/2)
}

// dial returns a connection to target: see dial.Curator.
func (c *Client) dial(target string) (*grpc.ClientConn, error) {
	return dial.Curator(target, dial.CuratorConfig{
		TLS:       c.TLS,
		Keepalive: c.Keepalive,
		Options:   append([]grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvSize))}, c.DialOptions...),
	})
}

func (c *Client) request() *apipb.WatchRequest {
	if c.NodeID == "" {
		return &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodesInCluster_{NodesInCluster: &apipb.WatchRequest_NodesInCluster{}}}
	}
	return &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodeInCluster_{NodeInCluster: &apipb.WatchRequest_NodeInCluster{NodeId: c.NodeID}}}
}
