package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/mgmtpb"
	"github.com/nodewatch/nodewatch/internal/testkit"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

const badRequests = `nodewatch_serve_streams_refused_total{reason="bad_request"}`

// TestNodeIDChecked: a node_in_cluster Watch for a node id that is empty,
// longer than MaxNodeIDLen, not UTF-8, unprintable or with '/' fails with
// InvalidArgument, which quotes the id cut short; each is counted as a
// bad_request, and the first alone is logged, cut short too. An id of
// MaxNodeIDLen printable bytes is served.
func TestNodeIDChecked(t *testing.T) {
	t.Parallel()
	st := curatortest.NewStore(t)
	longest := strings.Repeat("n", MaxNodeIDLen)
	st.Put(curatortest.Node(longest, up, "a"))
	g := serveGuarded(t, st, Config{}, Limits{})
	conn := curatortest.Dial(t, g.addr)
	if _, err := getNodes(t, conn, ""); err != nil { // the initial state is read
		t.Fatal(err)
	}
	before := scrapeMetrics(t, g.metrics)

	nuls := strings.Repeat("\x00", 16000)
	tests := []struct {
		id, want string
	}{
		{nuls, fmt.Sprintf(`invalid node_id %q… (16000 bytes): longer than %d bytes`, nuls[:64], MaxNodeIDLen)},
		{longest + "n", fmt.Sprintf(`invalid node_id %q… (%d bytes): longer than %d bytes`, longest[:64], MaxNodeIDLen+1, MaxNodeIDLen)},
		{"", `invalid node_id "": must be set`},
		{"n\tn", `invalid node_id "n\tn": unprintable character U+0009 at byte 1`},
		{"not/an/id", `invalid node_id "not/an/id": contains '/'`},
	}
	for _, tt := range tests {
		err := curatortest.Watch(t, conn, curatortest.NodeReq(tt.id)).End()
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "node_in_cluster: "+tt.want {
			t.Errorf("node_id %s: %v, want InvalidArgument %q", quoteID(tt.id), err, tt.want)
		}
	}
	if got := scrapeMetrics(t, g.metrics)[badRequests] - before[badRequests]; got != float64(len(tests)) {
		t.Errorf("%s moved by %v, want %d", badRequests, got, len(tests))
	}
	// Logged before the status was sent: every line is in the log now.
	lines := g.lines("stream refused", "reason", refusedBadRequest)
	if len(lines) != 1 {
		t.Fatalf("%d lines about bad requests, want 1 (the others held back):\n%s", len(lines), g.log)
	}
	l := lines[0]
	if l["level"] != "INFO" || l["method"] != "Watch" || l["code"] != "InvalidArgument" || l["error"] != "node_in_cluster: "+tests[0].want {
		t.Errorf("the line about the first bad request: %v", l)
	}
	if n := len(g.log.String()); n > 4<<10 {
		t.Errorf("%d bytes of log for %d bad requests, one of 16,000 bytes", n, len(tests))
	}

	w := curatortest.Watch(t, conn, curatortest.NodeReq(longest))
	if ev := w.Next(); ev.GetNodes()[0].GetId() != longest {
		t.Fatalf("node_id of %d bytes: %v", MaxNodeIDLen, ev)
	}
}

// rawCodec sends and receives messages as the bytes they are, whatever
// they hold: the client of TestUndecodable.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// TestUndecodable: a request that is not protobuf, or has a string that
// is not UTF-8, fails with InvalidArgument, not Internal, on every
// streaming method; each is
// counted as a bad_request, and the first alone is logged, with the
// method and the peer.
func TestUndecodable(t *testing.T) {
	t.Parallel()
	g := serveGuarded(t, curatortest.NewStore(t), Config{}, Limits{})
	conn := curatortest.Dial(t, g.addr)
	if _, err := getNodes(t, conn, ""); err != nil {
		t.Fatal(err)
	}
	before := scrapeMetrics(t, g.metrics)
	notProto := []byte{0xff, 0xff} // a field tag whose varint never ends
	// node_in_cluster { node_id: "n\xff" }: proto3 strings are UTF-8.
	kind := (&apipb.WatchRequest{}).ProtoReflect().Descriptor().Fields().ByName("node_in_cluster")
	id := kind.Message().Fields().ByName("node_id")
	nodeID := protowire.AppendString(protowire.AppendTag(nil, id.Number(), protowire.BytesType), "n\xff")
	notUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, kind.Number(), protowire.BytesType), nodeID)
	methods := []struct {
		name, path string
		req        []byte
		why        string // in the message
	}{
		{"Watch", "/" + apipb.Curator_ServiceDesc.ServiceName + "/Watch", notProto, "invalid wire-format"},
		{"Watch", "/" + apipb.Curator_ServiceDesc.ServiceName + "/Watch", notUTF8, "invalid UTF-8"},
		{"GetNodes", "/" + mgmtpb.Management_ServiceDesc.ServiceName + "/GetNodes", notProto, "invalid wire-format"},
		{"GetCurrentLeader", "/" + apipb.CuratorLocal_ServiceDesc.ServiceName + "/GetCurrentLeader", notProto, "invalid wire-format"},
	}
	for _, m := range methods {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
		defer cancel()
		s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, m.path, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(&m.req); err != nil {
			t.Fatal(err)
		}
		s.CloseSend()
		var resp []byte
		err = s.RecvMsg(&resp)
		if msg := status.Convert(err).Message(); status.Code(err) != codes.InvalidArgument ||
			!strings.HasPrefix(msg, m.name+": the request cannot be decoded: ") || !strings.Contains(msg, m.why) {
			t.Errorf("%s of %q: %v, want InvalidArgument saying %q", m.name, m.req, err, m.why)
		}
	}
	if got := scrapeMetrics(t, g.metrics)[badRequests] - before[badRequests]; got != float64(len(methods)) {
		t.Errorf("%s moved by %v, want %d", badRequests, got, len(methods))
	}
	lines := g.lines("stream refused", "reason", refusedBadRequest)
	if len(lines) != 1 {
		t.Fatalf("%d lines about bad requests, want 1 (the others held back):\n%s", len(lines), g.log)
	}
	if l := lines[0]; l["method"] != "Watch" || l["code"] != "InvalidArgument" || !strings.HasPrefix(fmt.Sprint(l["peer"]), "127.0.0.1:") {
		t.Errorf("the line about the first bad request: %v, want its method, code and peer", l)
	}
}
