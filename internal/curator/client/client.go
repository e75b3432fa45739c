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
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/backoff"
	"github.com/nodewatch/nodewatch/internal/curator"
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
// When a stream breaks, Run logs it, waits with capped exponential
// backoff (100ms doubling up to MaxBackoff), moves to the next endpoint,
// watches again and hands over the full state (CauseResync), which the
// follower turns into differences. A server answering codes.Unimplemented
// (a non-leader Metropolis node) is asked CuratorLocal.GetCurrentLeader,
// and the watch goes to the leader it names. InvalidArgument,
// PermissionDenied, Unauthenticated, NotFound, FailedPrecondition,
// OutOfRange and AlreadyExists end Run with an error wrapping the gRPC
// status (status.Code finds it); everything else (Unavailable, transport
// errors, a server that stops) is retried.
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
// broken (logged; reconnect as below). Each answer to a probe is handed
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
	// Logf reports broken streams, reconnects and leader redirects, and
	// nodes it skips. Nil discards.
	Logf func(format string, args ...any)
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
		if r.established.Load() > before {
			bo.Reset() // this was a working stream: a fresh failure
			r.lostAt.CompareAndSwap(0, time.Now().UnixNano())
		}
		d := bo.Next()
		c.logf("curator %s: %v; reconnecting to %s in %v", target, plain(err), c.Endpoints[(i+1)%len(c.Endpoints)], d)
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

func (c *Client) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// errDialWindow cancels an attempt when DialTimeout passes before the
// first stream is established.
var errDialWindow = errors.New("dial timeout passed")

// fatalError marks an error that retrying cannot fix.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// isFatal reports whether a server refusing a watch with code refuses it
// for good: asking again, elsewhere, gives the same answer.
func isFatal(code codes.Code) bool {
	switch code {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound,
		codes.FailedPrecondition, codes.OutOfRange, codes.AlreadyExists:
		return true
	}
	return false
}

// clientRun is the state of one Client.Run. Its atomics are shared with
// node_in_cluster's settle timer.
type clientRun struct {
	c        *Client
	out      flow.Sink
	deadline time.Time // for the first established stream

	established atomic.Int64 // streams established so far
	handedFull  atomic.Bool  // a full batch was handed over: the next is a resync
	// lostAt: unix nanoseconds when the last established stream broke,
	// until the next one is established (0: none broken since).
	lostAt atomic.Int64
}

func (r *clientRun) unavailable(lastErr error) error {
	msg := fmt.Sprintf("no connection to curator at %s within %v", r.c.endpoints(), r.c.dialTimeout())
	if lastErr == nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, msg)
	}
	return fmt.Errorf("%w: %s (last error: %v)", ErrUnavailable, msg, lastErr)
}

// attempt watches at target, or at the leader target names, until the
// stream breaks, and returns why.
func (r *clientRun) attempt(ctx context.Context, target string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if r.established.Load() == 0 {
		t := time.AfterFunc(time.Until(r.deadline), func() {
			if r.established.Load() == 0 {
				cancel(errDialWindow)
			}
		})
		defer t.Stop()
	}
	leader, err := r.watch(ctx, target)
	if leader != "" && ctx.Err() == nil {
		r.c.logf("curator %s is not the leader; following it to the leader at %s", target, leader)
		var next string
		next, err = r.watch(ctx, leader)
		switch {
		case next != "":
			err = fmt.Errorf("leader %s named by %s refused Watch too (it names %s): %w", leader, target, next, err)
		case err != nil:
			err = fmt.Errorf("leader %s: %w", leader, err)
		}
	}
	if errors.Is(context.Cause(ctx), errDialWindow) {
		return errDialWindow
	}
	return err
}

// watch connects to target and follows its Watch stream until it breaks.
// If target refuses with codes.Unimplemented, watch returns the address
// of the leader it names.
func (r *clientRun) watch(ctx context.Context, target string) (leader string, err error) {
	conn, err := r.c.dial(target)
	if err != nil {
		return "", &fatalError{fmt.Errorf("bad endpoint %q: %w", target, err)}
	}
	defer conn.Close()
	if err := waitReady(ctx, conn, r.c.connectTimeout()); err != nil {
		return "", err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stream, err := watchWire(sctx, conn, r.c.request())
	if err == nil {
		var est atomic.Bool
		var wg sync.WaitGroup
		heard := &atomic.Int64{} // when the stream or a probe last heard from the server
		heard.Store(time.Now().UnixNano())
		wg.Go(func() { r.prove(sctx, conn, target, heard, cancel) })
		if r.c.NodeID == "" {
			err = r.recvNodes(stream, &est, heard)
		} else {
			err = r.recvNode(stream, &est, heard)
		}
		cancel(nil)
		wg.Wait()
	}
	if cause := context.Cause(sctx); errors.Is(cause, errSilent) && ctx.Err() == nil {
		return "", cause
	}
	if ctx.Err() != nil {
		return "", err
	}
	switch code := status.Code(err); {
	case code == codes.Unimplemented:
		leader, lerr := currentLeader(ctx, conn, r.c.dialTimeout())
		if status.Code(lerr) == codes.Unimplemented {
			return "", &fatalError{fmt.Errorf("refuses Watch (%v) and does not serve GetCurrentLeader: not a curator", err)}
		}
		if lerr != nil {
			return "", fmt.Errorf("refuses Watch (%v) and names no leader: %w", err, lerr)
		}
		return leader, err
	case isFatal(code):
		return "", &fatalError{err}
	}
	return "", err
}

// waitReady connects conn and waits until it is ready, for at most
// timeout. A connection that failed is not an error here: the call that
// follows fails at once, with the reason.
func waitReady(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no connection within %v", timeout))
	defer cancel()
	conn.Connect()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready, connectivity.TransientFailure:
			return nil
		case connectivity.Shutdown:
			return errors.New("connection shut down")
		}
		if !conn.WaitForStateChange(ctx, s) {
			return context.Cause(ctx)
		}
	}
}

// currentLeader asks conn's server for the Curator leader and returns its
// host:port.
func currentLeader(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel() // ends the stream, which the server keeps open
	st, err := apipb.NewCuratorLocalClient(conn).GetCurrentLeader(ctx, &apipb.GetCurrentLeaderRequest{})
	if err != nil {
		return "", err
	}
	resp, err := st.Recv()
	if err == io.EOF {
		return "", errors.New("GetCurrentLeader ended without a response")
	}
	if err != nil {
		return "", err
	}
	host, port := resp.GetLeaderHost(), resp.GetLeaderPort()
	if host == "" || port <= 0 || port > 65535 {
		return "", fmt.Errorf("no leader known (leader %q at %q port %d)", resp.GetLeaderNodeId(), host, port)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// establish counts the stream whose flag est is as established, once.
func (r *clientRun) establish(est *atomic.Bool) {
	if est.CompareAndSwap(false, true) {
		r.established.Add(1)
		if lost := r.lostAt.Swap(0); lost != 0 {
			r.c.logf("curator: watching again after %v without a working stream", time.Since(time.Unix(0, lost)).Round(time.Millisecond))
		}
	}
}

// errSilent is wrapped by the error that ends a stream whose server
// answered nothing, not even a probe, for Keepalive.Time +
// Keepalive.Timeout.
var errSilent = errors.New("no answer")

// prove keeps a stream on conn proving that its server is alive, until
// ctx ends (see dial.Keepalive.Prove): the question is
// CuratorLocal.GetCurrentLeader on the same connection, which every
// Curator node serves (any answer will do, an error status included, as
// it proves that the connection carries bytes), and an answer is handed
// over as a Confirmed batch once the first full state was. A stream
// silent for the keepalive deadline is ended with errSilent through
// cancel. The Curator wire has no progress, so this confirms the
// connection, not the view.
func (r *clientRun) prove(ctx context.Context, conn *grpc.ClientConn, target string, heard *atomic.Int64, cancel context.CancelCauseFunc) {
	r.c.Keepalive.Prove(ctx, r.c.ConfirmEvery, heard,
		func(ctx context.Context) (bool, error) {
			if probe(ctx, conn) != nil {
				return false, nil
			}
			if r.handedFull.Load() { // a confirmation must not come before the first state
				r.out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Confirmed: true})
			}
			return true, nil
		},
		func(quiet time.Duration) {
			cancel(fmt.Errorf("%w from %s for %v, not even to a probe: the connection went silent", errSilent, target, quiet.Round(time.Millisecond)))
		})
}

// probe asks conn's server for the leader and reports whether it answered
// at all: nil for an answer, an error status included, that came over the
// connection.
func probe(ctx context.Context, conn *grpc.ClientConn) error {
	st, err := apipb.NewCuratorLocalClient(conn).GetCurrentLeader(ctx, &apipb.GetCurrentLeaderRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return err
	}
	return nil // the server answered, if only with an error
}

// recvNodes follows a nodes_in_cluster stream until it breaks. The
// backlog's events are turned into changes on as many goroutines as there
// are Ps (converting a node to its JSON is most of a listing's CPU), and
// merged in the order they came once the backlog is complete.
func (r *clientRun) recvNodes(stream watchStream, est *atomic.Bool, heard *atomic.Int64) error {
	var backlog *backlogConverter // nil once handed over
	defer func() {
		if backlog != nil {
			backlog.wait()
		}
	}()
	backlog = newBacklogConverter(r, est)
	for {
		ev, err := stream.Recv()
		if err != nil {
			return recvError(err)
		}
		heard.Store(time.Now().UnixNano())
		if backlog == nil {
			if ev.progress == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
				r.c.logf("curator sent a second PROGRESS_LAST_BACKLOGGED on one stream; taking its event as a change")
			}
			changes, err := r.changes(ev, "")
			if err != nil {
				return err
			}
			r.establish(est)
			if len(changes) > 0 {
				r.out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: changes})
			}
			continue
		}
		if err := backlog.failed(); err != nil {
			return err
		}
		if len(ev.tombstones) > 0 {
			r.c.logf("curator sent %d tombstones in the backlog; taking them as deletions", len(ev.tombstones))
		}
		backlog.add(ev)
		if ev.progress == apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED {
			latest, err := backlog.wait()
			backlog = nil
			if err != nil {
				return err
			}
			r.putFull(latest)
		}
	}
}

// backlogConverter turns a backlog's events into changes, GOMAXPROCS at a
// time; an event converted establishes the stream (est).
type backlogConverter struct {
	r       *clientRun
	est     *atomic.Bool
	sem     chan struct{}
	wg      sync.WaitGroup
	results []*[]flow.Change      // by event, in the order received
	nodes   atomic.Int64          // converted so far
	err     atomic.Pointer[error] // the first event that failed to convert
}

func newBacklogConverter(r *clientRun, est *atomic.Bool) *backlogConverter {
	return &backlogConverter{r: r, est: est, sem: make(chan struct{}, runtime.GOMAXPROCS(0))}
}

// add converts ev in the background.
func (b *backlogConverter) add(ev *wireEvent) {
	slot := new([]flow.Change)
	b.results = append(b.results, slot)
	b.sem <- struct{}{}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() { <-b.sem }()
		changes, err := b.r.changes(ev, "")
		if err != nil {
			b.err.CompareAndSwap(nil, &err)
			return
		}
		*slot = changes // read after wg.Wait
		b.r.establish(b.est)
		n := int(b.nodes.Add(int64(len(changes))))
		if b.r.c.Listed != nil {
			b.r.c.Listed(n)
		}
	}()
}

// failed returns the error of an event that failed to convert so far, if
// one did.
func (b *backlogConverter) failed() error {
	if err := b.err.Load(); err != nil {
		return *err
	}
	return nil
}

// wait returns the latest change of each id, once every event is
// converted, or the error of an event that failed to convert.
func (b *backlogConverter) wait() (map[string]flow.Change, error) {
	b.wg.Wait()
	if err := b.failed(); err != nil {
		return nil, err
	}
	latest := map[string]flow.Change{}
	for _, changes := range b.results {
		for _, c := range *changes {
			latest[c.ID] = c
		}
	}
	return latest, nil
}

// recvNode follows a node_in_cluster stream until it breaks; see Client
// for how its first batch is decided.
func (r *clientRun) recvNode(stream watchStream, est *atomic.Bool, heard *atomic.Int64) error {
	var (
		// mu orders the settle timer's batch with the stream's, and
		// guards first and over.
		mu    sync.Mutex
		first = true  // no full batch was handed over on this stream
		over  = false // the stream ended: the timer must hand over nothing
	)
	settle := time.AfterFunc(r.c.settle(), func() {
		mu.Lock()
		defer mu.Unlock()
		if over || !first {
			return
		}
		first = false
		r.putFull(nil)
		r.establish(est)
	})
	defer func() {
		settle.Stop()
		mu.Lock()
		over = true
		mu.Unlock()
	}()
	for {
		ev, err := stream.Recv()
		if err != nil {
			return recvError(err)
		}
		heard.Store(time.Now().UnixNano())
		changes, err := r.changes(ev, r.c.NodeID)
		if err != nil {
			return err
		}
		mu.Lock()
		if first {
			first = false
			latest := make(map[string]flow.Change, len(changes))
			for _, c := range changes {
				latest[c.ID] = c
			}
			r.putFull(latest)
		} else if len(changes) > 0 {
			r.out.Put(flow.Batch{Cause: flow.CauseChange, Synced: true, Changes: changes})
		}
		mu.Unlock()
		r.establish(est)
	}
}

// plain returns err with gRPC's wrapping of a failed connection taken
// off its message: "rpc error: code = Unavailable desc = connection
// error: desc = \"transport: authentication handshake failed: x509: …\""
// becomes "x509: …", which says why (the credentials' errors name the
// files and flags). The result keeps err's status for status.Code.
func plain(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return err
	}
	msg := st.Message()
	if rest, ok := strings.CutPrefix(msg, "connection error: desc = "); ok {
		if u, uerr := strconv.Unquote(rest); uerr == nil {
			msg = u
		}
	}
	for _, p := range []string{"transport: authentication handshake failed: ", "error reading server preface: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return &plainError{msg: msg, err: err}
}

// plainError is an error with a plainer message.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }

func recvError(err error) error {
	if err == io.EOF {
		return errors.New("the server ended the stream")
	}
	return err
}

// putFull hands over the full state whose latest changes per id are
// latest (deletes among them are dropped).
func (r *clientRun) putFull(latest map[string]flow.Change) {
	b := flow.Batch{Cause: flow.CauseInitial, Synced: true, Changes: make([]flow.Change, 0, len(latest))}
	if r.handedFull.Swap(true) {
		b.Cause = flow.CauseResync
	}
	for _, c := range latest {
		if !c.Deleted {
			b.Changes = append(b.Changes, c)
		}
	}
	r.out.Put(b)
}

// changes turns ev into changes, nodes first, then tombstones; only those
// of node only, unless only is "". It fails if a node is not a Node
// message, which fails the event as a whole (as unmarshalling it did).
func (r *clientRun) changes(ev *wireEvent, only string) ([]flow.Change, error) {
	out := make([]flow.Change, 0, len(ev.nodes)+len(ev.tombstones))
	for _, node := range ev.nodes {
		id, obj, err := curator.ObjectOfWire(node)
		switch {
		case errors.Is(err, curator.ErrNodeWire):
			return nil, status.Error(codes.Internal, err.Error())
		case id == "":
			r.c.logf("skipping a node without id")
			continue
		case only != "" && id != only:
			r.c.logf("skipping node %q: watching %q", id, only)
			continue
		case err != nil:
			r.c.logf("skipping node %q: %v", id, err)
			continue
		}
		out = append(out, flow.Change{ID: id, Object: obj})
	}
	for _, t := range ev.tombstones {
		if id := t.GetNodeId(); id != "" && (only == "" || id == only) {
			out = append(out, flow.Change{ID: id, Deleted: true})
		}
	}
	return out, nil
}
