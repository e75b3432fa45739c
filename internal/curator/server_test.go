package curator

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/etcdtest"
)

const (
	up    = commonpb.NodeState_NODE_STATE_UP
	fresh = commonpb.NodeState_NODE_STATE_NEW
)

// last is the progress marker of the last backlog event.
const last = apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED

func nodesEvent(p apipb.WatchEvent_Progress, nodes ...*apipb.Node) *apipb.WatchEvent {
	return &apipb.WatchEvent{Nodes: nodes, Progress: p}
}

func tombstone(id string) *apipb.WatchEvent {
	return &apipb.WatchEvent{NodeTombstones: []*apipb.NodeTombstone{{NodeId: id}}}
}

func diffEvent(t *testing.T, want, got *apipb.WatchEvent) {
	t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

// serveStore starts a Server over st and a gRPC server for it, and
// returns a connection to it.
func serveStore(t *testing.T, st *store, lg *logs) (*Server, *grpcServer) {
	t.Helper()
	s := startServer(t, ServerConfig{Etcd: st.etcd, Prefix: st.prefix, Logf: lg.logf, MaxBackoff: 200 * time.Millisecond})
	return s, serveGRPC(t, "", s)
}

func TestServerBacklog(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*apipb.Node
		want  *apipb.WatchEvent
	}{{
		name: "no nodes: one empty event with the marker",
		want: nodesEvent(last),
	}, {
		name:  "nodes in id order, marked last",
		nodes: []*apipb.Node{node("n2", up, "b"), node("n3", fresh, ""), node("n1", up, "a")},
		want:  nodesEvent(last, node("n1", up, "a"), node("n2", up, "b"), node("n3", fresh, "")),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t)
			st.put(tt.nodes...)
			etcdtest.Put(t, st.etcd, "/nodesX", "outside the prefix")
			_, g := serveStore(t, st, newLogs(t))
			w := watch(t, dial(t, g.addr), nodesReq())
			diffEvent(t, tt.want, w.next())
			w.none()
		})
	}
}

// TestServerBacklogSplit: a backlog over MaxEventSize arrives in several
// events, none over the limit, in id order, the last one marked.
func TestServerBacklogSplit(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	const n = 40
	big := strings.Repeat("x", 120<<10) // 40 × 120 KiB ≈ 4.7 MiB
	var want []*apipb.Node
	for i := range n {
		nd := node(fmt.Sprintf("n%02d", i), up, "a")
		nd.Labels = &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "big", Value: big}}}
		want = append(want, nd)
	}
	st.put(want...)
	_, g := serveStore(t, st, newLogs(t))
	w := watch(t, dial(t, g.addr), nodesReq())
	var got []*apipb.Node
	events := 0
	for {
		ev := w.next()
		events++
		if size := proto.Size(ev); size > MaxEventSize {
			t.Errorf("event %d is %d bytes, over %d", events, size, MaxEventSize)
		}
		got = append(got, ev.Nodes...)
		if ev.Progress == last {
			break
		}
	}
	if events < 3 {
		t.Errorf("backlog of %d nodes came in %d events, want at least 3", n, events)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("backlog (-want +got):\n%s", diff)
	}
	w.none()
}

// TestServerBacklogOversizedNode: a node larger than the limit travels
// alone; the others still respect it.
func TestServerBacklogOversizedNode(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	nodes := []*apipb.Node{node("a", up, "1"), node("b", up, "2"), node("c", up, "3"), node("d", up, "4")}
	nodes[1].Labels = &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "big", Value: strings.Repeat("x", 500)}}}
	st.put(nodes...)
	s := NewServer(ServerConfig{Etcd: st.etcd})
	s.eventLimit = 100 // fits two small nodes, not the big one
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	g := serveGRPC(t, "", s)
	defer g.stop()
	w := watch(t, dial(t, g.addr), nodesReq())
	for _, want := range []*apipb.WatchEvent{
		nodesEvent(0, nodes[0]),
		nodesEvent(0, nodes[1]),
		nodesEvent(last, nodes[2], nodes[3]),
	} {
		diffEvent(t, want, w.next())
	}
}

// TestServerLive: after the backlog, each change is one event; identical
// re-puts are none.
func TestServerLive(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	st.put(node("n1", fresh, ""))
	_, g := serveStore(t, st, newLogs(t))
	w := watch(t, dial(t, g.addr), nodesReq())
	diffEvent(t, nodesEvent(last, node("n1", fresh, "")), w.next())

	st.put(node("n2", up, "b"))
	diffEvent(t, nodesEvent(0, node("n2", up, "b")), w.next())
	st.put(node("n1", up, "a"))
	diffEvent(t, nodesEvent(0, node("n1", up, "a")), w.next())
	st.put(node("n1", up, "a")) // same record again: not news
	w.none()
	st.del("n2")
	diffEvent(t, tombstone("n2"), w.next())
	st.del("n2") // already gone
	w.none()
}

// TestServerNodeInCluster: nothing while the node does not exist, then its
// states, then a tombstone; other nodes never show.
func TestServerNodeInCluster(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	st.put(node("n2", up, "b"))
	_, g := serveStore(t, st, newLogs(t))
	conn := dial(t, g.addr)
	w := watch(t, conn, nodeReq("n1"))
	w.none()
	st.put(node("n3", up, "c"))
	w.none()
	st.put(node("n1", fresh, ""))
	diffEvent(t, nodesEvent(0, node("n1", fresh, "")), w.next())
	st.put(node("n1", up, "a"))
	diffEvent(t, nodesEvent(0, node("n1", up, "a")), w.next())
	st.del("n1")
	diffEvent(t, tombstone("n1"), w.next())
	st.del("n2")
	w.none()

	// A stream for an existing node starts with its state.
	w2 := watch(t, conn, nodeReq("n3"))
	diffEvent(t, nodesEvent(0, node("n3", up, "c")), w2.next())
	w2.none()
}

func TestServerWatchErrors(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	_, g := serveStore(t, st, newLogs(t))
	conn := dial(t, g.addr)
	tests := []struct {
		name string
		req  *apipb.WatchRequest
		want codes.Code
	}{
		{"empty node id", nodeReq(""), codes.InvalidArgument},
		{"node id with a slash", nodeReq("a/b"), codes.InvalidArgument},
		{"node_in_cluster without its message", &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodeInCluster_{}}, codes.InvalidArgument},
		{"kind unset", &apipb.WatchRequest{}, codes.Unimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := watch(t, conn, tt.req).end()
			if got := status.Code(err); got != tt.want {
				t.Errorf("Watch error %v, want code %v", err, tt.want)
			}
		})
	}
}

// TestServerStopped: when Run returns, open streams end Unavailable, and
// so do new ones.
func TestServerStopped(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	st.put(node("n1", up, "a"))
	s := NewServer(ServerConfig{Etcd: st.etcd})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	g := serveGRPC(t, "", s)
	conn := dial(t, g.addr)
	w := watch(t, conn, nodesReq())
	w.next()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if err := w.end(); status.Code(err) != codes.Unavailable {
		t.Errorf("open stream ended with %v, want Unavailable", err)
	}
	if err := watch(t, conn, nodeReq("n1")).end(); status.Code(err) != codes.Unavailable {
		t.Errorf("new stream ended with %v, want Unavailable", err)
	}
	if err := s.Run(context.Background()); err == nil {
		t.Error("second Run succeeded, want an error")
	}
}

// TestServerBadRecords: undecodable records are logged with their key and
// skipped, in the backlog and live, and streams go on.
func TestServerBadRecords(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	st.put(node("n1", up, "a"))
	st.putRaw("garbage", "\xff not a record")
	st.putRaw("wrong-id", `{"id":"someone-else"}`)
	st.putRaw("nested/key", `{"id":"nested/key"}`)
	lg := newLogs(t)
	_, g := serveStore(t, st, lg)
	w := watch(t, dial(t, g.addr), nodesReq())
	diffEvent(t, nodesEvent(last, node("n1", up, "a")), w.next())
	lg.waitFor(`"/nodes/garbage"`)
	lg.waitFor(`"/nodes/wrong-id"`, "someone-else")
	lg.waitFor(`"/nodes/nested/key"`)

	st.putRaw("n1", "{broken")
	lg.waitFor(`"/nodes/n1"`, "skipping")
	st.put(node("n2", up, "b"))
	diffEvent(t, nodesEvent(0, node("n2", up, "b")), w.next())
}

// countingWatcher counts the etcd watches opened through it; they are
// real ones.
type countingWatcher struct {
	clientv3.Watcher
	n atomic.Int32
}

func (w *countingWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	w.n.Add(1)
	return w.Watcher.Watch(ctx, key, opts...)
}

// TestServerSharedWatch: any number of streams share one etcd watch.
func TestServerSharedWatch(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	st.put(node("n1", up, "a"))
	ec := etcdtest.Client(t, st.url)
	cw := &countingWatcher{Watcher: ec.Watcher}
	ec.Watcher = cw
	s := startServer(t, ServerConfig{Etcd: ec})
	g := serveGRPC(t, "", s)
	w1 := watch(t, dial(t, g.addr), nodesReq())
	w2 := watch(t, dial(t, g.addr), nodesReq())
	w3 := watch(t, dial(t, g.addr), nodeReq("n2"))
	diffEvent(t, nodesEvent(last, node("n1", up, "a")), w1.next())
	diffEvent(t, nodesEvent(last, node("n1", up, "a")), w2.next())
	st.put(node("n2", up, "b"))
	for _, w := range []*stream{w1, w2, w3} {
		diffEvent(t, nodesEvent(0, node("n2", up, "b")), w.next())
	}
	if got := s.subscribers(); got != 3 {
		t.Errorf("server has %d subscribers, want 3", got)
	}
	if got := cw.n.Load(); got != 1 {
		t.Errorf("server opened %d etcd watches, want 1", got)
	}
}

// TestServerEtcdResync: after losing etcd and its history (compaction),
// the server lists again and streams receive only what really changed.
func TestServerEtcdResync(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	st.put(node("a", up, "1"), node("b", up, "2"), node("c", up, "3"))
	proxy := etcdtest.NewProxy(t, st.url)
	lg := newLogs(t)
	s := startServer(t, ServerConfig{Etcd: etcdtest.Client(t, proxy.Endpoint), Logf: lg.logf, MaxBackoff: 200 * time.Millisecond})
	g := serveGRPC(t, "", s)
	w := watch(t, dial(t, g.addr), nodesReq())
	diffEvent(t, nodesEvent(last, node("a", up, "1"), node("b", up, "2"), node("c", up, "3")), w.next())

	proxy.Cut()
	st.put(node("a", up, "1")) // a new revision, the same node
	st.del("b")
	st.put(node("c", fresh, "3"))
	st.put(node("d", up, "4"))
	rev := etcdtest.Put(t, st.etcd, "/other", "x")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := st.etcd.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()

	lg.waitFor("compacted")
	diffEvent(t, tombstone("b"), w.next())
	diffEvent(t, nodesEvent(0, node("c", fresh, "3")), w.next())
	diffEvent(t, nodesEvent(0, node("d", up, "4")), w.next())
	w.none()
}

func TestServerGetCurrentLeader(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	s := startServer(t, ServerConfig{Etcd: st.etcd, NodeID: "metropolis-1", Host: "192.0.2.7", Port: 7835})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, got := askLeader(t, ctx, s)
	want := &apipb.GetCurrentLeaderResponse{LeaderNodeId: "metropolis-1", LeaderHost: "192.0.2.7", LeaderPort: 7835, ThisNodeId: "metropolis-1"}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("GetCurrentLeader (-want +got):\n%s", diff)
	}
	// The stream stays open until the client leaves.
	ended := make(chan error, 1)
	go func() {
		_, err := l.Recv()
		ended <- err
	}()
	select {
	case err := <-ended:
		t.Fatalf("GetCurrentLeader ended: %v", err)
	case <-time.After(quiet):
	}
	cancel()
	select {
	case err := <-ended:
		if status.Code(err) != codes.Canceled {
			t.Errorf("after cancel: %v, want Canceled", err)
		}
	case <-time.After(timeout):
		t.Fatal("GetCurrentLeader did not end after cancel")
	}
}

// TestServerLeaderHostUnspecified: a server listening on every interface
// (host 0.0.0.0) names as leader_host the address the client reached it
// at, which the client can use, not 0.0.0.0.
func TestServerLeaderHostUnspecified(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	s := startServer(t, ServerConfig{Etcd: st.etcd, NodeID: "n", Host: "0.0.0.0", Port: 7835})
	_, got := askLeader(t, context.Background(), s) // served on 127.0.0.1
	if got.GetLeaderHost() != "127.0.0.1" {
		t.Fatalf("leader_host %q, want 127.0.0.1 (where the client reached the server)", got.GetLeaderHost())
	}
}

// askLeader serves s on loopback, asks it GetCurrentLeader and returns
// the open stream (ended with ctx) and its first response.
func askLeader(t *testing.T, ctx context.Context, s *Server) (apipb.CuratorLocal_GetCurrentLeaderClient, *apipb.GetCurrentLeaderResponse) {
	t.Helper()
	g := serveGRPC(t, "", s)
	l, err := apipb.NewCuratorLocalClient(dial(t, g.addr)).GetCurrentLeader(ctx, &apipb.GetCurrentLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return l, got
}
