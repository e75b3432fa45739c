package server

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
)

// TestCodec: what codec sends is what gRPC's codec sends, sharedEvents
// included, and it decodes as the event meant.
func TestCodec(t *testing.T) {
	rec := func(id string) *record {
		wire, err := curator.EncodeRecordBinary(&apipb.Node{Id: id, State: up})
		if err != nil {
			t.Fatal(err)
		}
		return newRecord(wire, curator.Health{})
	}
	a, b := rec("metropolis-a"), rec("metropolis-b")
	node := func(id string) *apipb.Node { return &apipb.Node{Id: id, State: up} }
	two := backlogEventsOf([]fieldNode{a.field, b.field}, curator.MaxEventSize)
	split := backlogEventsOf([]fieldNode{a.field, b.field}, len(a.field)+len(progressLast))
	tests := []struct {
		name string
		ev   proto.Message
		want *apipb.WatchEvent
	}{
		{"a change", share(a.field), nodesEvent(0, node("metropolis-a"))},
		{"a backlog in one event", two.events[0], nodesEvent(last, node("metropolis-a"), node("metropolis-b"))},
		{"a backlog in two events: the first", split.events[0], nodesEvent(0, node("metropolis-a"))},
		{"a backlog in two events: the last", split.events[1], nodesEvent(last, node("metropolis-b"))},
		{"an empty backlog", backlogEventsOf(nil, curator.MaxEventSize).events[0], nodesEvent(last)},
		{"a tombstone", tombstone("metropolis-a"), tombstone("metropolis-a")},
		{"nodes as fields", nodesEvent(last, node("metropolis-a")), nodesEvent(last, node("metropolis-a"))},
	}
	c := codec{proto: encoding.GetCodecV2(protocodec.Name)}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := c.Marshal(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			got := data.Materialize()
			want, err := proto.Marshal(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("codec's bytes (-gRPC's +codec's):\n%s", diff)
			}
			dec := &apipb.WatchEvent{}
			if err := proto.Unmarshal(got, dec); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, dec, protocmp.Transform()); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
	if len(split.events) != 2 || !slices.Equal(split.nodes, []int{1, 1}) || !slices.Equal(two.nodes, []int{2}) {
		t.Errorf("a backlog of two nodes, each fitting alone: %d events of %v nodes, want 2 of 1; in one event: %v nodes", len(split.events), split.nodes, two.nodes)
	}
}
