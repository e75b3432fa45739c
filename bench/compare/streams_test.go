//go:build linux

package main

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
)

// TestScanEvent: scanEvent reads a WatchEvent's size and its progress
// marker, wherever the marker is among the fields.
func TestScanEvent(t *testing.T) {
	nodes := []*apipb.Node{{Id: "metropolis-a", State: commonpb.NodeState_NODE_STATE_UP}, {Id: "metropolis-b"}}
	marked, err := proto.Marshal(&apipb.WatchEvent{Nodes: nodes, Progress: apipb.WatchEvent_PROGRESS_LAST_BACKLOGGED})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := proto.Marshal(&apipb.WatchEvent{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	// The marker after the nodes, as serve may write it.
	after := append(append([]byte{}, plain...), 0x10, 0x01)
	tombstone, err := proto.Marshal(&apipb.WatchEvent{NodeTombstones: []*apipb.NodeTombstone{{NodeId: "metropolis-a"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		last bool
	}{{"nodes", plain, false}, {"nodes and the marker", marked, true}, {"the marker after the nodes", after, true},
		{"a tombstone", tombstone, false}, {"an empty event", nil, false}} {
		ev, err := scanEvent(tc.b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ev.size != len(tc.b) || ev.last != tc.last {
			t.Errorf("%s: size %d, last %v; want %d, %v", tc.name, ev.size, ev.last, len(tc.b), tc.last)
		}
	}
	if _, err := scanEvent(plain[:len(plain)-1]); err == nil {
		t.Errorf("a truncated event: no error")
	}
}
