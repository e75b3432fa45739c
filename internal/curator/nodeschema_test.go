package curator

import (
	"bytes"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// TestNodeSchema: the Node's table is made, and a message with a field
// the writers do not write (a oneof) is refused.
func TestNodeSchema(t *testing.T) {
	if nodeSchemaErr != nil {
		t.Fatalf("the Node's table: %v (every node is left to protojson)", nodeSchemaErr)
	}
	if _, err := newSchema(&apipb.WatchRequest{}); err == nil {
		t.Error("newSchema(WatchRequest), whose fields are a oneof: no error")
	}
}

// TestSchemaOtherMessage: both writers follow any table newSchema makes
// as protojson writes the message: here a WatchEvent's, whose repeated
// field is followed by others (a Node's repeated fields come last).
func TestSchemaOtherMessage(t *testing.T) {
	m, err := newSchema(&apipb.WatchEvent{})
	if err != nil {
		t.Fatal(err)
	}
	events := []*apipb.WatchEvent{
		{},
		{Nodes: []*apipb.Node{{Id: "a", State: commonpb.NodeState_NODE_STATE_UP}, {}, {Id: "b"}}, Progress: 1,
			NodeTombstones: []*apipb.NodeTombstone{{NodeId: "c"}, {NodeId: "d"}}},
		{Nodes: []*apipb.Node{{Id: "a"}}, NodeTombstones: []*apipb.NodeTombstone{{}}},
		{Progress: 7},
	}
	for _, ev := range events {
		j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		want := jsondoc.CompactValid(j)
		if got, ok := appendMessage(nil, m, unsafe.Pointer(ev)); !ok || !bytes.Equal(got, want) {
			t.Errorf("appendMessage(%v) = %s, %v; want %s", ev, got, ok, want)
		}
		wire, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := appendMessageWire(nil, wire, m); !ok || !bytes.Equal(got, want) {
			t.Errorf("appendMessageWire(%v) = %s, %v; want %s", ev, got, ok, want)
		}
	}
}
