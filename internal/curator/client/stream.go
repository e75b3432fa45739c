package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/dial"
	"github.com/nodewatch/nodewatch/internal/flow"
)

// clientRun is the state of one Client.Run. Its atomics are shared with
// node_in_cluster's settle timer.
type clientRun struct {
	c        *Client
	out      flow.Sink
	deadline time.Time // for the first established stream

	established atomic.Int64 // streams established so far
	handedFull  atomic.Bool  // a full batch was handed over: the next is a resync
	// outage tells the user of losses and recoveries.
	outage *dial.Outage
	// at is the address of the current (or last) stream: an endpoint, or
	// the leader it named.
	at atomic.Pointer[string]
	// heard: unix nanoseconds when the current stream, or a probe on its
	// connection, last heard from the server.
	heard atomic.Int64
	// saidLeader is the leader a redirect to was last said on Logf (Run's
	// goroutine only).
	saidLeader string
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
		say := r.c.Debugf.Printf // a leader said before: each reconnect would repeat it
		if leader != r.saidLeader {
			say, r.saidLeader = r.c.Logf.Printf, leader
		}
		say("curator %s is not the leader; following it to the leader at %s", target, leader)
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
	r.at.Store(&target)
	conn, err := r.c.dial(target)
	if err != nil {
		return "", &fatalError{fmt.Errorf("bad endpoint %q: %w", target, err)}
	}
	defer conn.Close()
	if err := waitReady(ctx, conn, r.c.connectTimeout()); err != nil {
		return "", err
	}
	if conn.GetState() == connectivity.Ready {
		r.outage.Reached()
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stream, err := watchWire(sctx, conn, r.c.request())
	if err == nil {
		var est atomic.Bool
		var wg sync.WaitGroup
		heard := &r.heard // when the stream or a probe last heard from the server
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
		if at := r.at.Load(); at != nil {
			r.outage.Up(*at)
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
			cancel(fmt.Errorf("%w for %v, not even to a probe: the connection went silent", errSilent, quiet.Round(time.Millisecond)))
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
