package curator_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
)

// FuzzDecodeRecord: whatever bytes sit under the prefix, decoding either
// fails with an error or yields a node with the key's id that Object can
// print; it never panics.
func FuzzDecodeRecord(f *testing.F) {
	n := &apipb.Node{Id: "metropolis-x", State: commonpb.NodeState_NODE_STATE_UP}
	bin, _ := proto.Marshal(n)
	js, _ := curator.EncodeRecord(n)
	for _, s := range [][]byte{bin, js, []byte("{"), []byte(`{"id":"metropolis-x","state":"NODE_STATE_NOPE"}`), nil} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := curator.DecodeRecord("metropolis-x", b)
		if err != nil {
			return
		}
		if got.GetId() != "metropolis-x" {
			t.Fatalf("decoded id %q", got.GetId())
		}
		if _, err := curator.Object(got); err != nil {
			t.Fatalf("Object of a decoded record: %v", err)
		}
	})
}
