package client

import (
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// scripted is a Curator on the real wire that misbehaves as told: its
// i-th Watch stream sends the events of streams[i] (the last script
// again once they run out); a nil event ends the stream at once with
// Unavailable, as a server that crashes does; after the last event the
// stream stays open.
type scripted struct {
	apipb.UnimplementedCuratorServer
	streams [][]*apipb.WatchEvent

	mu sync.Mutex // guards n
	n  int        // streams opened
}

func (s *scripted) Register(r grpc.ServiceRegistrar) { apipb.RegisterCuratorServer(r, s) }

func (s *scripted) Watch(_ *apipb.WatchRequest, st apipb.Curator_WatchServer) error {
	s.mu.Lock()
	script := s.streams[min(s.n, len(s.streams)-1)]
	s.n++
	s.mu.Unlock()
	for _, ev := range script {
		if ev == nil {
			return status.Error(codes.Unavailable, "scripted: the server goes away")
		}
		if err := st.Send(ev); err != nil {
			return err
		}
	}
	<-st.Context().Done()
	return nil
}

func events(evs ...*apipb.WatchEvent) []*apipb.WatchEvent { return evs }

func nodesEv(p apipb.WatchEvent_Progress, ids ...string) *apipb.WatchEvent {
	ev := &apipb.WatchEvent{Progress: p}
	for _, id := range ids {
		ev.Nodes = append(ev.Nodes, curatortest.Node(id, up, "addr-"+id))
	}
	return ev
}

func tombstoneEv(ids ...string) *apipb.WatchEvent {
	ev := &apipb.WatchEvent{}
	for _, id := range ids {
		ev.NodeTombstones = append(ev.NodeTombstones, &apipb.NodeTombstone{NodeId: id})
	}
	return ev
}

// rawEv is an event whose one node is a Node message holding only the id
// given as raw bytes, which need not be valid UTF-8 (proto.Marshal
// refuses to write such a string; a broken server need not), followed
// by pad bytes of an unknown field.
func rawEv(id string, pad int, p apipb.WatchEvent_Progress) *apipb.WatchEvent {
	var node []byte
	node = protowire.AppendTag(node, 1, protowire.BytesType)
	node = protowire.AppendString(node, id)
	if pad > 0 {
		node = protowire.AppendTag(node, 99, protowire.BytesType)
		node = protowire.AppendBytes(node, make([]byte, pad))
	}
	var raw []byte
	raw = protowire.AppendTag(raw, 1, protowire.BytesType)
	raw = protowire.AppendBytes(raw, node)
	ev := &apipb.WatchEvent{Progress: p}
	ev.ProtoReflect().SetUnknown(protoreflect.RawFields(raw))
	return ev
}

const last = apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED

// TestClientMisbehavingServer: against a Curator that breaks the wire's
// rules, the client reports on stderr (the Logf lines) and resyncs or
// goes on; it never fails, and never hands over a node state that was
// not sent.
func TestClientMisbehavingServer(t *testing.T) {
	t.Parallel()
	n := func(id string) flow.Change { return upsert(t, curatortest.Node(id, up, "addr-"+id)) }
	type misbehaviour struct {
		name    string
		nodeID  string // "" for nodes_in_cluster
		streams [][]*apipb.WatchEvent
		want    []flow.Batch
		log     string // a line saying this is logged
		opts    []grpc.DialOption
	}
	// breaks is a misbehaviour where the first stream sends node a, then
	// bad, which the client cannot take: it watches again, and the next
	// stream sends node a again. For nodes_in_cluster (bad ends the
	// backlog) that is the initial state; for node_in_cluster a, a
	// resync after the initial state.
	breaks := func(name, nodeID string, bad *apipb.WatchEvent, log string, opts ...grpc.DialOption) misbehaviour {
		m := misbehaviour{name: name, nodeID: nodeID, log: log, opts: opts}
		if nodeID == "" {
			m.streams = [][]*apipb.WatchEvent{events(nodesEv(0, "a"), bad), events(nodesEv(last, "a"))}
			m.want = []flow.Batch{batch(flow.CauseInitial, n("a"))}
		} else {
			m.streams = [][]*apipb.WatchEvent{events(nodesEv(0, "a"), bad), events(nodesEv(0, "a"))}
			m.want = []flow.Batch{batch(flow.CauseInitial, n("a")), batch(flow.CauseResync, n("a"))}
		}
		return m
	}
	small := grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1024))
	for _, tc := range []misbehaviour{
		{
			name: "ends the stream abruptly",
			streams: [][]*apipb.WatchEvent{
				events(nodesEv(0, "a", "b"), nodesEv(last), nodesEv(0, "a"), nil),
				events(nodesEv(last, "a")),
			},
			want: []flow.Batch{
				batch(flow.CauseInitial, n("a"), n("b")),
				batch(flow.CauseChange, n("a")),
				batch(flow.CauseResync, n("a")),
			},
			log: "the server goes away); retrying",
		},
		{
			name:    "a second PROGRESS_LAST_BACKLOGGED",
			streams: [][]*apipb.WatchEvent{events(nodesEv(last, "a"), nodesEv(last, "b"), tombstoneEv("a"))},
			want: []flow.Batch{
				batch(flow.CauseInitial, n("a")),
				batch(flow.CauseChange, n("b")),
				batch(flow.CauseChange, deletion("a")),
			},
			log: "a second PROGRESS_LAST_BACKLOGGED",
		},
		{
			name:    "tombstones in the backlog",
			streams: [][]*apipb.WatchEvent{events(nodesEv(0, "a", "b"), tombstoneEv("b", "z"), nodesEv(last, "c"))},
			want:    []flow.Batch{batch(flow.CauseInitial, n("a"), n("c"))},
			log:     "tombstones in the backlog",
		},
		{
			name:    "a node with an empty id",
			streams: [][]*apipb.WatchEvent{events(nodesEv(last, "a", ""), nodesEv(0, ""), nodesEv(0, "b"))},
			want: []flow.Batch{
				batch(flow.CauseInitial, n("a")),
				batch(flow.CauseChange, n("b")),
			},
			log: "skipping a node without id",
		},
		breaks("an id that is not valid UTF-8", "", rawEv("b\xff", 0, last), "invalid UTF-8"),
		breaks("an oversized message", "", rawEv("big", 4096, last), "larger than max", small),
		{
			name:   "node: another node, an empty id, a tombstone for another node",
			nodeID: "a",
			streams: [][]*apipb.WatchEvent{
				events(nodesEv(0, "a"), nodesEv(0, "b"), nodesEv(0, ""), tombstoneEv("b"), tombstoneEv("a")),
			},
			want: []flow.Batch{
				batch(flow.CauseInitial, n("a")),
				batch(flow.CauseChange, deletion("a")),
			},
			log: `skipping node "b": watching "a"`,
		},
		breaks("node: an id that is not valid UTF-8", "a", rawEv("a\xff", 0, 0), "invalid UTF-8"),
		breaks("node: an oversized message", "a", rawEv("a", 4096, 0), "larger than max", small),
		{
			name:   "node: ends the stream abruptly",
			nodeID: "a",
			streams: [][]*apipb.WatchEvent{
				events(nodesEv(0, "a"), nil),
				events(),
			},
			want: []flow.Batch{
				batch(flow.CauseInitial, n("a")),
				batch(flow.CauseResync),
			},
			log: "the server goes away); retrying",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := curatortest.ServeGRPC(t, "", &scripted{streams: tc.streams})
			lg := curatortest.NewLogs(t)
			c := testClient(lg, g.Addr)
			c.NodeID = tc.nodeID
			c.DialOptions = tc.opts
			r := startClient(t, c)
			for _, want := range tc.want {
				diffBatch(t, want, r.next())
			}
			lg.WaitFor(tc.log)
			r.none()
			select {
			case <-r.done:
				t.Fatalf("Run returned: %v", r.err)
			default:
			}
		})
	}
}
