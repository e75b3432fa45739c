package server

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
	"github.com/nodewatch/nodewatch/internal/testkit/etcdtest"
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
		nodes: []*apipb.Node{curatortest.Node("n2", up, "b"), curatortest.Node("n3", fresh, ""), curatortest.Node("n1", up, "a")},
		want:  nodesEvent(last, curatortest.Node("n1", up, "a"), curatortest.Node("n2", up, "b"), curatortest.Node("n3", fresh, "")),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := curatortest.NewStore(t)
			st.Put(tt.nodes...)
			etcdtest.Put(t, st.Etcd, "/nodesX", "outside the prefix")
			_, g := serveStore(t, st, curatortest.NewLogs(t))
			w := curatortest.Watch(t, curatortest.Dial(t, g.Addr), curatortest.NodesReq())
			diffEvent(t, tt.want, w.Next())
			w.None()
		})
	}
}

// TestServerBacklogSplit: a backlog over curator.MaxEventSize arrives in several
// events, none over the limit, in id order, the last one marked.
func TestServerBacklogSplit(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	const n = 40
	big := strings.Repeat("x", 120<<10) // 40 × 120 KiB ≈ 4.7 MiB
	var want []*apipb.Node
	for i := range n {
		nd := curatortest.Node(fmt.Sprintf("n%02d", i), up, "a")
		nd.Labels = &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "big", Value: big}}}
		want = append(want, nd)
	}
	st.Put(want...)
	_, g := serveStore(t, st, curatortest.NewLogs(t))
	w := curatortest.Watch(t, curatortest.Dial(t, g.Addr), curatortest.NodesReq())
	var got []*apipb.Node
	events := 0
	for {
		ev := w.Next()
		events++
		if size := proto.Size(ev); size > curator.MaxEventSize {
			t.Errorf("event %d is %d bytes, over %d", events, size, curator.MaxEventSize)
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
	w.None()
}

// TestServerBacklogOversizedNode: a node larger than the limit travels
// alone; the others still respect it.
func TestServerBacklogOversizedNode(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	nodes := []*apipb.Node{curatortest.Node("a", up, "1"), curatortest.Node("b", up, "2"), curatortest.Node("c", up, "3"), curatortest.Node("d", up, "4")}
	nodes[1].Labels = &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "big", Value: strings.Repeat("x", 500)}}}
	st.Put(nodes...)
	s := New(Config{Etcd: st.Etcd})
	s.eventLimit = 100 // fits two small nodes, not the big one
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	g := curatortest.ServeGRPC(t, "", s)
	defer g.Stop()
	w := curatortest.Watch(t, curatortest.Dial(t, g.Addr), curatortest.NodesReq())
	for _, want := range []*apipb.WatchEvent{
		nodesEvent(0, nodes[0]),
		nodesEvent(0, nodes[1]),
		nodesEvent(last, nodes[2], nodes[3]),
	} {
		diffEvent(t, want, w.Next())
	}
}

// TestServerLive: after the backlog, each change is one event; identical
// re-puts are none.
func TestServerLive(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n1", fresh, ""))
	_, g := serveStore(t, st, curatortest.NewLogs(t))
	w := curatortest.Watch(t, curatortest.Dial(t, g.Addr), curatortest.NodesReq())
	diffEvent(t, nodesEvent(last, curatortest.Node("n1", fresh, "")), w.Next())

	st.Put(curatortest.Node("n2", up, "b"))
	diffEvent(t, nodesEvent(0, curatortest.Node("n2", up, "b")), w.Next())
	st.Put(curatortest.Node("n1", up, "a"))
	diffEvent(t, nodesEvent(0, curatortest.Node("n1", up, "a")), w.Next())
	st.Put(curatortest.Node("n1", up, "a")) // same record again: not news
	w.None()
	st.Del("n2")
	diffEvent(t, tombstone("n2"), w.Next())
	st.Del("n2") // already gone
	w.None()
}

// TestServerNodeInCluster: nothing while the node does not exist, then its
// states, then a tombstone; other nodes never show.
func TestServerNodeInCluster(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n2", up, "b"))
	_, g := serveStore(t, st, curatortest.NewLogs(t))
	conn := curatortest.Dial(t, g.Addr)
	w := curatortest.Watch(t, conn, curatortest.NodeReq("n1"))
	w.None()
	st.Put(curatortest.Node("n3", up, "c"))
	w.None()
	st.Put(curatortest.Node("n1", fresh, ""))
	diffEvent(t, nodesEvent(0, curatortest.Node("n1", fresh, "")), w.Next())
	st.Put(curatortest.Node("n1", up, "a"))
	diffEvent(t, nodesEvent(0, curatortest.Node("n1", up, "a")), w.Next())
	st.Del("n1")
	diffEvent(t, tombstone("n1"), w.Next())
	st.Del("n2")
	w.None()

	// A stream for an existing node starts with its state.
	w2 := curatortest.Watch(t, conn, curatortest.NodeReq("n3"))
	diffEvent(t, nodesEvent(0, curatortest.Node("n3", up, "c")), w2.Next())
	w2.None()
}

func TestServerWatchErrors(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	_, g := serveStore(t, st, curatortest.NewLogs(t))
	conn := curatortest.Dial(t, g.Addr)
	tests := []struct {
		name string
		req  *apipb.WatchRequest
		want codes.Code
	}{
		{"empty node id", curatortest.NodeReq(""), codes.InvalidArgument},
		{"node id with a slash", curatortest.NodeReq("a/b"), codes.InvalidArgument},
		{"node_in_cluster without its message", &apipb.WatchRequest{Kind: &apipb.WatchRequest_NodeInCluster_{}}, codes.InvalidArgument},
		{"kind unset", &apipb.WatchRequest{}, codes.Unimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := curatortest.Watch(t, conn, tt.req).End()
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
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n1", up, "a"))
	s := New(Config{Etcd: st.Etcd})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	g := curatortest.ServeGRPC(t, "", s)
	conn := curatortest.Dial(t, g.Addr)
	w := curatortest.Watch(t, conn, curatortest.NodesReq())
	w.Next()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if err := w.End(); status.Code(err) != codes.Unavailable {
		t.Errorf("open stream ended with %v, want Unavailable", err)
	}
	if err := curatortest.Watch(t, conn, curatortest.NodeReq("n1")).End(); status.Code(err) != codes.Unavailable {
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
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n1", up, "a"))
	st.PutRaw("garbage", "\xff not a record")
	st.PutRaw("wrong-id", `{"id":"someone-else"}`)
	st.PutRaw("nested/key", `{"id":"nested/key"}`)
	lg := curatortest.NewLogs(t)
	_, g := serveStore(t, st, lg)
	w := curatortest.Watch(t, curatortest.Dial(t, g.Addr), curatortest.NodesReq())
	diffEvent(t, nodesEvent(last, curatortest.Node("n1", up, "a")), w.Next())
	lg.WaitFor(`"/nodes/garbage"`)
	lg.WaitFor(`"/nodes/wrong-id"`, "someone-else")
	lg.WaitFor(`"/nodes/nested/key"`)

	st.PutRaw("n1", "{broken")
	lg.WaitFor(`"/nodes/n1"`, "skipping")
	st.Put(curatortest.Node("n2", up, "b"))
	diffEvent(t, nodesEvent(0, curatortest.Node("n2", up, "b")), w.Next())
}

// watchStreams counts the etcd Watch streams a client opens: a stream
// interceptor on its connection.
type watchStreams struct{ n atomic.Int32 }

func (w *watchStreams) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method == "/etcdserverpb.Watch/Watch" {
		w.n.Add(1)
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// TestServerSharedWatch: any number of streams share one etcd watch.
func TestServerSharedWatch(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("n1", up, "a"))
	var cw watchStreams
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{st.URL}, DialTimeout: testkit.Timeout, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(cw.intercept)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ec.Close() }) // after the server's cleanup: LIFO
	s := startServer(t, Config{Etcd: ec})
	g := curatortest.ServeGRPC(t, "", s)
	w1 := curatortest.Watch(t, curatortest.Dial(t, g.Addr), curatortest.NodesReq())
	w2 := curatortest.Watch(t, curatortest.Dial(t, g.Addr), curatortest.NodesReq())
	w3 := curatortest.Watch(t, curatortest.Dial(t, g.Addr), curatortest.NodeReq("n2"))
	diffEvent(t, nodesEvent(last, curatortest.Node("n1", up, "a")), w1.Next())
	diffEvent(t, nodesEvent(last, curatortest.Node("n1", up, "a")), w2.Next())
	st.Put(curatortest.Node("n2", up, "b"))
	for _, w := range []*curatortest.Stream{w1, w2, w3} {
		diffEvent(t, nodesEvent(0, curatortest.Node("n2", up, "b")), w.Next())
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
	st := curatortest.NewStore(t)
	st.Put(curatortest.Node("a", up, "1"), curatortest.Node("b", up, "2"), curatortest.Node("c", up, "3"))
	proxy := etcdtest.NewProxy(t, st.URL)
	lg := curatortest.NewLogs(t)
	s := startServer(t, Config{Etcd: etcdtest.Client(t, proxy.Endpoint), Log: lg.Logger(), MaxBackoff: 200 * time.Millisecond})
	g := curatortest.ServeGRPC(t, "", s)
	w := curatortest.Watch(t, curatortest.Dial(t, g.Addr), curatortest.NodesReq())
	diffEvent(t, nodesEvent(last, curatortest.Node("a", up, "1"), curatortest.Node("b", up, "2"), curatortest.Node("c", up, "3")), w.Next())

	proxy.Cut()
	st.Put(curatortest.Node("a", up, "1")) // a new revision, the same node
	st.Del("b")
	st.Put(curatortest.Node("c", fresh, "3"))
	st.Put(curatortest.Node("d", up, "4"))
	rev := etcdtest.Put(t, st.Etcd, "/other", "x")
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if _, err := st.Etcd.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()

	lg.WaitFor("compacted")
	diffEvent(t, tombstone("b"), w.Next())
	diffEvent(t, nodesEvent(0, curatortest.Node("c", fresh, "3")), w.Next())
	diffEvent(t, nodesEvent(0, curatortest.Node("d", up, "4")), w.Next())
	w.None()
}

func TestServerGetCurrentLeader(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	s := startServer(t, Config{Etcd: st.Etcd, NodeID: "metropolis-1", Host: "192.0.2.7", Port: 7835})
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
	case <-time.After(testkit.Quiet):
	}
	cancel()
	select {
	case err := <-ended:
		if status.Code(err) != codes.Canceled {
			t.Errorf("after cancel: %v, want Canceled", err)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("GetCurrentLeader did not end after cancel")
	}
}

// TestServerLeaderHostUnspecified: a server listening on every interface
// (host 0.0.0.0) names as leader_host the address the client reached it
// at, which the client can use, not 0.0.0.0.
func TestServerLeaderHostUnspecified(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	s := startServer(t, Config{Etcd: st.Etcd, NodeID: "n", Host: "0.0.0.0", Port: 7835})
	_, got := askLeader(t, context.Background(), s) // served on 127.0.0.1
	if got.GetLeaderHost() != "127.0.0.1" {
		t.Fatalf("leader_host %q, want 127.0.0.1 (where the client reached the server)", got.GetLeaderHost())
	}
}

// askLeader serves s on loopback, asks it GetCurrentLeader and returns
// the open stream (ended with ctx) and its first response.
func askLeader(t *testing.T, ctx context.Context, s *Server) (apipb.CuratorLocal_GetCurrentLeaderClient, *apipb.GetCurrentLeaderResponse) {
	t.Helper()
	g := curatortest.ServeGRPC(t, "", s)
	l, err := apipb.NewCuratorLocalClient(curatortest.Dial(t, g.Addr)).GetCurrentLeader(ctx, &apipb.GetCurrentLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return l, got
}
