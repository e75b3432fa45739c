package apipb_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
)

// The expected bytes below are written by hand from the field numbers in
// proto/ and the protobuf wire format, so that a renumbered field or a changed
// type fails here rather than silently against a real Metropolis cluster.
//
// A field's tag is one varint: field_number<<3 | wire_type, with wire type
// 0 = VARINT (ints, enums, bools) and 2 = LEN (strings, bytes, messages,
// packed repeated). A LEN field is followed by a varint byte length and then
// the payload. Default values (0, "", empty enum) of proto3 scalars are not
// sent; a set-but-empty message field is sent as tag + length 0.

// Marshal: Go message -> bytes.
func TestWireMarshal(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		want []byte
	}{
		{
			name: "WatchEvent with one node, one tombstone, last backlogged",
			msg: &apipb.WatchEvent{
				Nodes: []*apipb.Node{{
					Id:     "n1",
					Status: &commonpb.NodeStatus{ExternalAddress: "192.0.2.1"},
					State:  commonpb.NodeState_NODE_STATE_UP,
					Labels: &commonpb.NodeLabels{
						Pairs: []*commonpb.NodeLabels_Pair{{Key: "k", Value: "v"}},
					},
				}},
				Progress:       apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED,
				NodeTombstones: []*apipb.NodeTombstone{{NodeId: "n2"}},
			},
			want: []byte{
				// WatchEvent.nodes (1<<3|2 = 0x0a), Node is 29 (0x1d) bytes:
				0x0a, 0x1d,
				//   Node.id (1<<3|2 = 0x0a), 2 bytes, "n1".
				0x0a, 0x02, 'n', '1',
				//   Node.status (3<<3|2 = 0x1a), NodeStatus is 11 (0x0b) bytes:
				0x1a, 0x0b,
				//     NodeStatus.external_address (1<<3|2 = 0x0a), 9 bytes, "192.0.2.1".
				0x0a, 0x09, '1', '9', '2', '.', '0', '.', '2', '.', '1',
				//   Node.state (5<<3|0 = 0x28), NODE_STATE_UP = 3.
				0x28, 0x03,
				//   Node.labels (6<<3|2 = 0x32), NodeLabels is 8 bytes:
				0x32, 0x08,
				//     NodeLabels.pairs (1<<3|2 = 0x0a), Pair is 6 bytes:
				0x0a, 0x06,
				//       Pair.key (1<<3|2 = 0x0a), 1 byte, "k".
				0x0a, 0x01, 'k',
				//       Pair.value (2<<3|2 = 0x12), 1 byte, "v".
				0x12, 0x01, 'v',
				// WatchEvent.progress (2<<3|0 = 0x10), PROGRESS_LAST_BACKLOGGED = 1.
				0x10, 0x01,
				// WatchEvent.node_tombstones (3<<3|2 = 0x1a), NodeTombstone is 4 bytes:
				0x1a, 0x04,
				//   NodeTombstone.node_id (1<<3|2 = 0x0a), 2 bytes, "n2".
				0x0a, 0x02, 'n', '2',
			},
		},
		{
			name: "empty WatchEvent encodes to nothing",
			msg:  &apipb.WatchEvent{},
			want: []byte{},
		},
		{
			name: "Node roles: empty role messages are present on the wire",
			msg: &apipb.Node{
				Roles: &commonpb.NodeRoles{
					KubernetesWorker: &commonpb.NodeRoles_KubernetesWorker{},
					ConsensusMember:  &commonpb.NodeRoles_ConsensusMember{},
				},
			},
			want: []byte{
				// Node.roles (2<<3|2 = 0x12), NodeRoles is 4 bytes:
				0x12, 0x04,
				//   NodeRoles.kubernetes_worker (1<<3|2 = 0x0a), 0 bytes.
				0x0a, 0x00,
				//   NodeRoles.consensus_member (2<<3|2 = 0x12), 0 bytes.
				0x12, 0x00,
			},
		},
		{
			name: "GetCurrentLeaderResponse",
			msg: &apipb.GetCurrentLeaderResponse{
				LeaderNodeId: "a",
				LeaderHost:   "h",
				LeaderPort:   7835,
				ThisNodeId:   "b",
			},
			want: []byte{
				// leader_node_id (1<<3|2 = 0x0a), 1 byte, "a".
				0x0a, 0x01, 'a',
				// leader_host (2<<3|2 = 0x12), 1 byte, "h".
				0x12, 0x01, 'h',
				// leader_port (3<<3|0 = 0x18), varint 7835 = 0x1e9b:
				// low 7 bits 0x1b with continuation bit (0x9b), then 0x3d.
				0x18, 0x9b, 0x3d,
				// this_node_id (4<<3|2 = 0x22), 1 byte, "b".
				0x22, 0x01, 'b',
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(tt.msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if got == nil {
				got = []byte{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Marshal mismatch (-want +got):\n%s", diff)
			}

			// The hand-written bytes must also decode back to the message.
			back := tt.msg.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(tt.want, back); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tt.msg, back, protocmp.Transform()); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Unmarshal: bytes -> Go message.
func TestWireUnmarshalWatchRequest(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want *apipb.WatchRequest
	}{
		{
			name: "node_in_cluster",
			in: []byte{
				// WatchRequest.node_in_cluster (1<<3|2 = 0x0a), NodeInCluster is 3 bytes:
				0x0a, 0x03,
				//   NodeInCluster.node_id (1<<3|2 = 0x0a), 1 byte, "x".
				0x0a, 0x01, 'x',
			},
			want: &apipb.WatchRequest{
				Kind: &apipb.WatchRequest_NodeInCluster_{
					NodeInCluster: &apipb.WatchRequest_NodeInCluster{NodeId: "x"},
				},
			},
		},
		{
			name: "nodes_in_cluster",
			in: []byte{
				// WatchRequest.nodes_in_cluster (2<<3|2 = 0x12), 0 bytes.
				0x12, 0x00,
			},
			want: &apipb.WatchRequest{
				Kind: &apipb.WatchRequest_NodesInCluster_{
					NodesInCluster: &apipb.WatchRequest_NodesInCluster{},
				},
			},
		},
		{
			name: "both oneof members on the wire: last one wins",
			in: []byte{
				// WatchRequest.node_in_cluster (0x0a), 3 bytes: node_id (0x0a), 1 byte, "x".
				0x0a, 0x03, 0x0a, 0x01, 'x',
				// WatchRequest.nodes_in_cluster (0x12), 0 bytes.
				0x12, 0x00,
			},
			want: &apipb.WatchRequest{
				Kind: &apipb.WatchRequest_NodesInCluster_{
					NodesInCluster: &apipb.WatchRequest_NodesInCluster{},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := &apipb.WatchRequest{}
			if err := proto.Unmarshal(tt.in, got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Unmarshal mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
