package client

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// attemptLog forwards the connections it accepts to a target and notes
// when it accepted each: one per connection attempt of the client that
// dials it. A connection the target refuses is closed at once, as a
// restarting server's port would refuse it. Its methods are safe for
// concurrent use.
type attemptLog struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every forwarded connection

	mu       sync.Mutex // guards the fields below
	accepted []time.Time
	conns    map[net.Conn]struct{}
}

// newAttemptLog starts an attemptLog to target, closed when the test ends.
func newAttemptLog(t *testing.T, target string) *attemptLog {
	t.Helper()
	l := testkit.Listen(t)
	a := &attemptLog{l: l, target: target, conns: map[net.Conn]struct{}{}}
	a.wg.Go(a.accept)
	t.Cleanup(func() {
		l.Close()
		a.mu.Lock()
		for c := range a.conns {
			c.Close()
		}
		a.mu.Unlock()
		a.wg.Wait()
	})
	return a
}

func (a *attemptLog) Addr() string { return a.l.Addr().String() }

func (a *attemptLog) accept() {
	for {
		in, err := a.l.Accept()
		if err != nil {
			return
		}
		a.mu.Lock()
		a.accepted = append(a.accepted, time.Now())
		a.conns[in] = struct{}{}
		a.mu.Unlock()
		a.wg.Go(func() { a.forward(in) })
	}
}

func (a *attemptLog) forward(in net.Conn) {
	defer func() {
		a.mu.Lock()
		delete(a.conns, in)
		a.mu.Unlock()
		in.Close()
	}()
	out, err := net.DialTimeout("tcp", a.target, testkit.Timeout)
	if err != nil {
		return
	}
	a.mu.Lock()
	a.conns[out] = struct{}{}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.conns, out)
		a.mu.Unlock()
		out.Close()
	}()
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(out, in)
		out.Close()
	})
	io.Copy(in, out)
	in.Close()
	wg.Wait()
}

// waitFor waits until n attempts were accepted at or after t0, and
// returns their times.
func (a *attemptLog) waitFor(t *testing.T, n int, t0 time.Time) []time.Time {
	t.Helper()
	var at []time.Time
	testkit.Eventually(t, func() error {
		if at = a.since(t0); len(at) < n {
			return fmt.Errorf("%d attempts, want %d", len(at), n)
		}
		return nil
	})
	return at[:n]
}

// since returns the times of the attempts accepted at or after t0.
func (a *attemptLog) since(t0 time.Time) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Time
	for _, at := range a.accepted {
		if !at.Before(t0) {
			out = append(out, at)
		}
	}
	return out
}

// TestReconnectJitter: two clients reconnecting to a restarted serve do
// not retry in lockstep (jitter). Both lose the server at the same moment
// when it stops; while it is down, each connection attempt of each client
// is noted where it dials (an attemptLog per client); the two sequences of
// attempts must not be the same to within a few milliseconds, as they
// were with a backoff without jitter (100ms, 200ms, 200ms … after the
// loss, for both). Once serve is back, both resync.
func TestReconnectJitter(t *testing.T) {
	t.Parallel()
	const (
		n         = 10                    // attempts of each client compared
		lockstep  = 10 * time.Millisecond // two attempts this close are in step
		maxInStep = 8                     // of n: fewer are in step with jitter, all of them without
	)
	n1 := curatortest.Node("n1", up, "a")
	s := serveNodes(t, n1)
	lg, srv, g := s.lg, s.srv, s.g

	logs := []*attemptLog{newAttemptLog(t, g.Addr), newAttemptLog(t, g.Addr)}
	var clients []*running
	for _, a := range logs {
		r := startClient(t, testClient(lg, a.Addr()))
		diffBatch(t, batch(flow.CauseInitial, upsert(t, n1)), r.next())
		clients = append(clients, r)
	}

	stopped := time.Now()
	g.Stop()
	a, b := logs[0].waitFor(t, n, stopped), logs[1].waitFor(t, n, stopped)
	inStep, report := 0, ""
	for i := range n {
		d := a[i].Sub(b[i]).Abs()
		if d <= lockstep {
			inStep++
		}
		report += fmt.Sprintf("\n  %2d: %6v %6v (apart %v)", i, a[i].Sub(stopped).Round(time.Millisecond), b[i].Sub(stopped).Round(time.Millisecond), d.Round(time.Millisecond))
	}
	t.Logf("attempts after the stop, client A and B:%s", report)
	if inStep >= maxInStep {
		t.Errorf("%d of %d attempts of the two clients within %v of each other: they retry in lockstep", inStep, n, lockstep)
	}

	curatortest.ServeGRPC(t, g.Addr, srv)
	for _, r := range clients {
		diffBatch(t, batch(flow.CauseResync, upsert(t, n1)), r.next())
	}
}
