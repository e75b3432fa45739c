package client

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/server"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handoff"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
	"github.com/nodewatch/nodewatch/internal/view"
)

// obj returns n as the client hands it over.
func obj(t *testing.T, n *apipb.Node) *jsondoc.Doc {
	t.Helper()
	o, err := curator.Object(n)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func upsert(t *testing.T, n *apipb.Node) flow.Change {
	return flow.Change{ID: n.GetId(), Object: obj(t, n)}
}

func deletion(id string) flow.Change { return flow.Change{ID: id, Deleted: true} }

func batch(cause flow.Cause, changes ...flow.Change) flow.Batch {
	return flow.Batch{Cause: cause, Synced: true, Changes: changes}
}

func diffBatch(t *testing.T, want, got flow.Batch) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("batch (-want +got):\n%s", diff)
	}
}

// apply runs b through f and returns the events it prints.
func apply(t *testing.T, f *view.Follower, b flow.Batch) []flow.Event {
	t.Helper()
	var evs []flow.Event
	if err := f.Apply(b, func(ev flow.Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// testClient returns a Client for addrs with test-sized timings, which
// logs to lg, every failed attempt too (Debugf). The first stream should
// be established: DialTimeout is the test timeout.
// Settle is a second: the servers tests connect to hold their records
// before they serve (serveReady), so a silent stream is a missing node,
// not a server still listing etcd.
func testClient(lg *curatortest.Logs, addrs ...string) *Client {
	return &Client{
		Endpoints:   addrs,
		Logf:        lg.Logf,
		Debugf:      lg.Logf,
		DialTimeout: testkit.Timeout,
		MaxBackoff:  200 * time.Millisecond,
		Settle:      time.Second,
	}
}

// deadAddr returns a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l := testkit.Listen(t)
	l.Close()
	return l.Addr().String()
}

// silentAddr returns a loopback address that accepts TCP connections (in
// the kernel's backlog) but never speaks.
func silentAddr(t *testing.T) string {
	t.Helper()
	return testkit.Listen(t).Addr().String()
}

// TestClientNodes: the backlog becomes one initial batch, each later
// event one change batch, tombstones deletes.
func TestClientNodes(t *testing.T) {
	t.Parallel()
	n1, n2, n3 := curatortest.Node("n1", up, "a"), curatortest.Node("n2", fresh, ""), curatortest.Node("n3", up, "c")
	s := serveNodes(t, n2, n1)
	r := startClient(t, s.client())
	diffBatch(t, batch(flow.CauseInitial, upsert(t, n1), upsert(t, n2)), r.next())

	s.st.Put(n3)
	diffBatch(t, batch(flow.CauseChange, upsert(t, n3)), r.next())
	n2 = curatortest.Node("n2", up, "b")
	s.st.Put(n2)
	diffBatch(t, batch(flow.CauseChange, upsert(t, n2)), r.next())
	s.st.Del("n1") // an event with a tombstone only
	diffBatch(t, batch(flow.CauseChange, deletion("n1")), r.next())
	r.none()
}

// TestClientBacklogInSeveralEvents: however many events the backlog takes,
// it is one batch.
func TestClientBacklogInSeveralEvents(t *testing.T) {
	t.Parallel()
	var nodes []*apipb.Node
	var want []flow.Change
	// 300 KB a node: the 10 nodes take two events of at most 2 MiB.
	pad := strings.Repeat("x", 300<<10)
	for i := range 10 {
		n := curatortest.Node("n"+strconv.Itoa(i), up, "192.0.2."+strconv.Itoa(i))
		n.Labels = &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "pad", Value: pad}}}
		nodes = append(nodes, n)
		want = append(want, upsert(t, n))
	}
	r := startClient(t, serveNodes(t, nodes...).client())
	diffBatch(t, batch(flow.CauseInitial, want...), r.next())
	r.none()
}

// TestClientReconnectResync: the server goes away while nodes change; on
// its return the client hands over the full state, which a follower turns
// into exactly the differences.
func TestClientReconnectResync(t *testing.T) {
	t.Parallel()
	a, b, c := curatortest.Node("a", up, "1"), curatortest.Node("b", up, "2"), curatortest.Node("c", fresh, "")
	s := serveNodes(t, a, b, c)
	r := startClient(t, s.client())
	f := view.NewFollower(nil, nil)
	if evs := apply(t, f, r.next()); len(evs) != 4 {
		t.Fatalf("initial events %+v, want 3 new and batch_done", evs)
	}

	s.g.Stop()
	s.lg.WaitFor("lost curator at " + s.g.Addr)
	s.st.Del("b")
	c2, d := curatortest.Node("c", up, "3"), curatortest.Node("d", up, "4")
	s.st.Put(c2, d)
	// A new server (which lists etcd afresh) on the same address.
	serveReady(t, s.g.Addr, server.Config{Etcd: s.st.Etcd, Log: s.lg.Logger()})

	got := r.next()
	if got.Cause != flow.CauseResync {
		t.Fatalf("batch after reconnect has cause %v, want resync", got.Cause)
	}
	want := []flow.Event{
		{Type: flow.Deleted, ID: "b", Prev: obj(t, b)},
		{Type: flow.Updated, ID: "c", Object: obj(t, c2), Prev: obj(t, c)},
		{Type: flow.New, ID: "d", Object: obj(t, d)},
		{Type: flow.BatchDone, Batch: 2, Synced: true, Cause: flow.CauseResync, Counts: flow.Counts{New: 1, Updated: 1, Deleted: 1}},
	}
	if diff := cmp.Diff(want, apply(t, f, got)); diff != "" {
		t.Errorf("events after resync (-want +got):\n%s", diff)
	}
	r.none()
}

// TestClientEndpoints: an endpoint that is down is skipped, and when the
// one in use goes down, the client moves to the next.
func TestClientEndpoints(t *testing.T) {
	t.Parallel()
	n1 := curatortest.Node("n1", up, "a")
	s := serveNodes(t, n1)
	lg, gA := s.lg, s.g
	_, gB := serveStore(t, s.st, lg)

	t.Run("endpoint in use goes down", func(t *testing.T) {
		r := startClient(t, testClient(lg, gA.Addr, gB.Addr))
		diffBatch(t, batch(flow.CauseInitial, upsert(t, n1)), r.next())
		gA.Stop()
		lg.WaitFor("lost curator at " + gA.Addr)
		diffBatch(t, batch(flow.CauseResync, upsert(t, n1)), r.next())
		lg.WaitFor("recovered curator at " + gB.Addr)
	})

	t.Run("first endpoint refuses connections", func(t *testing.T) {
		r := startClient(t, testClient(lg, deadAddr(t), gB.Addr))
		diffBatch(t, batch(flow.CauseInitial, upsert(t, n1)), r.next())
	})

	t.Run("first endpoint does not answer", func(t *testing.T) {
		r := startClient(t, testClient(lg, silentAddr(t), gB.Addr))
		diffBatch(t, batch(flow.CauseInitial, upsert(t, n1)), r.next())
	})
}

// TestClientFollowsLeader: a non-leader answers Unimplemented and names
// the leader; the client watches there.
func TestClientFollowsLeader(t *testing.T) {
	t.Parallel()
	n1 := curatortest.Node("n1", up, "a")
	s := serveNodes(t, n1)
	lg, leader := s.lg, s.g
	host, port, err := net.SplitHostPort(leader.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	other := curatortest.ServeGRPC(t, "", &curatortest.NonLeader{NodeID: "metropolis-2", LeaderNodeID: "metropolis-1", LeaderHost: host, LeaderPort: p})

	r := startClient(t, testClient(lg, other.Addr))
	diffBatch(t, batch(flow.CauseInitial, upsert(t, n1)), r.next())
	lg.WaitFor(other.Addr, "not the leader", leader.Addr)
}

// TestClientUnavailable: without a connection within DialTimeout, Run
// gives up with ErrUnavailable naming the endpoints and DialTimeout. It
// cannot give up earlier than DialTimeout; how much later depends on the
// machine's load, so the upper bound is only that it gives up at all.
func TestClientUnavailable(t *testing.T) {
	t.Parallel()
	const dialTimeout = 500 * time.Millisecond
	tests := []struct {
		name      string
		endpoints func(t *testing.T) []string
	}{
		{"refused", func(t *testing.T) []string { return []string{deadAddr(t)} }},
		{"silent", func(t *testing.T) []string { return []string{silentAddr(t)} }},
		{"all of several", func(t *testing.T) []string { return []string{deadAddr(t), silentAddr(t), deadAddr(t)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := testClient(curatortest.NewLogs(t), tt.endpoints(t)...)
			c.DialTimeout = dialTimeout
			start := time.Now()
			r := startClient(t, c)
			err := r.wait()
			elapsed := time.Since(start)
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "within "+dialTimeout.String()) {
				t.Fatalf("Run = %v, want ErrUnavailable within %v", err, dialTimeout)
			}
			t.Logf("Run = %v (after %v)", err, elapsed)
			if elapsed < dialTimeout {
				t.Errorf("Run gave up after %v, before its DialTimeout %v", elapsed, dialTimeout)
			}
			for _, ep := range c.Endpoints {
				if !strings.Contains(err.Error(), ep) {
					t.Errorf("error %q does not name endpoint %s", err, ep)
				}
			}
		})
	}
}

// TestClientRefused: a server refusing the watch for good ends Run with
// its status, at once.
func TestClientRefused(t *testing.T) {
	t.Parallel()
	c := serveNodes(t).client()
	c.NodeID = "a/b"
	err := startClient(t, c).wait()
	if status.Code(err) != codes.InvalidArgument || errors.Is(err, ErrUnavailable) {
		t.Errorf("Run = %v, want InvalidArgument", err)
	}
	t.Logf("Run = %v", err)
}

// TestClientRunEndsWithContext: Run returns ctx.Err(), connected or not.
func TestClientRunEndsWithContext(t *testing.T) {
	t.Parallel()
	s := serveNodes(t)
	for _, ep := range []string{s.g.Addr, silentAddr(t)} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- testClient(s.lg, ep).Run(ctx, handoff.New(0)) }()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run at %s = %v, want context.Canceled", ep, err)
			}
		case <-time.After(testkit.Timeout):
			t.Fatalf("Run at %s did not return after cancel", ep)
		}
	}
}

// TestClientNode: a missing node is an empty initial state after Settle;
// then its states, then its deletion.
func TestClientNode(t *testing.T) {
	t.Parallel()
	s := serveNodes(t, curatortest.Node("other", up, "x"))
	c := s.client()
	c.NodeID = "n1"
	r := startClient(t, c)
	diffBatch(t, batch(flow.CauseInitial), r.next())

	n1 := curatortest.Node("n1", fresh, "")
	s.st.Put(n1)
	diffBatch(t, batch(flow.CauseChange, upsert(t, n1)), r.next())
	n1 = curatortest.Node("n1", up, "a")
	s.st.Put(n1)
	diffBatch(t, batch(flow.CauseChange, upsert(t, n1)), r.next())
	s.st.Put(curatortest.Node("other", fresh, "x"))
	r.none()
	s.st.Del("n1")
	diffBatch(t, batch(flow.CauseChange, deletion("n1")), r.next())
	r.none()
}

// TestClientNodeResync: across reconnects, a node changed meanwhile comes
// back as a resync holding it, one deleted meanwhile as an empty resync;
// the follower prints the update and the deletion.
func TestClientNodeResync(t *testing.T) {
	t.Parallel()
	n1 := curatortest.Node("n1", fresh, "")
	s := serveNodes(t, n1)
	g := s.g
	c := s.client()
	c.NodeID = "n1"
	r := startClient(t, c)
	f := view.NewFollower(nil, nil)
	// restart stands in a new server (which lists etcd afresh) on the
	// same address, once it holds the records: the client must not
	// settle for "no node" while it lists.
	restart := func() *curatortest.GRPCServer {
		_, g := serveReady(t, g.Addr, server.Config{Etcd: s.st.Etcd, Log: s.lg.Logger()})
		return g
	}
	b := r.next()
	diffBatch(t, batch(flow.CauseInitial, upsert(t, n1)), b)
	apply(t, f, b)

	g.Stop()
	s.lg.WaitFor("lost curator at " + g.Addr)
	n1b := curatortest.Node("n1", up, "a")
	s.st.Put(n1b)
	g = restart()
	b = r.next()
	diffBatch(t, batch(flow.CauseResync, upsert(t, n1b)), b)
	want := []flow.Event{
		{Type: flow.Updated, ID: "n1", Object: obj(t, n1b), Prev: obj(t, n1)},
		{Type: flow.BatchDone, Batch: 2, Synced: true, Cause: flow.CauseResync, Counts: flow.Counts{Updated: 1}},
	}
	if diff := cmp.Diff(want, apply(t, f, b)); diff != "" {
		t.Errorf("events after the first reconnect (-want +got):\n%s", diff)
	}

	g.Stop()
	s.st.Del("n1")
	restart()
	b = r.next()
	diffBatch(t, batch(flow.CauseResync), b)
	want = []flow.Event{
		{Type: flow.Deleted, ID: "n1", Prev: obj(t, n1b)},
		{Type: flow.BatchDone, Batch: 3, Synced: true, Cause: flow.CauseResync, Counts: flow.Counts{Deleted: 1}},
	}
	if diff := cmp.Diff(want, apply(t, f, b)); diff != "" {
		t.Errorf("events after the second reconnect (-want +got):\n%s", diff)
	}
	r.none()
}
