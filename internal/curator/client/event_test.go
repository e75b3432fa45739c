package client

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// eventMismatch says how reading the WatchEvent b as a wireEvent, then
// its nodes with curator.ObjectOfWire, differs from what the client did
// before: proto.Unmarshal of the event (whose error, a node's included,
// failed the event), then curator.Object of each node.
func eventMismatch(b []byte) error {
	want := &apipb.WatchEvent{}
	wantErr := proto.Unmarshal(b, want)
	var ev wireEvent
	err := ev.unmarshal(b)
	var objs [][]byte
	var objErrs []error
	if err == nil {
		for _, node := range ev.nodes {
			_, obj, oerr := curator.ObjectOfWire(node)
			if errors.Is(oerr, curator.ErrNodeWire) {
				err = oerr
				break
			}
			if obj != nil {
				objs = append(objs, obj.JSON())
			} else {
				objs = append(objs, nil)
			}
			objErrs = append(objErrs, oerr)
		}
	}
	switch {
	case wantErr != nil && err == nil:
		return fmt.Errorf("event %x read, proto.Unmarshal fails: %v", b, wantErr)
	case wantErr != nil:
		return nil
	case err != nil:
		return fmt.Errorf("event %x: %v; proto.Unmarshal reads %v", b, err, want)
	case ev.progress != want.Progress:
		return fmt.Errorf("event %x: progress %v, want %v", b, ev.progress, want.Progress)
	case len(ev.nodes) != len(want.Nodes):
		return fmt.Errorf("event %x: %d nodes, want %d", b, len(ev.nodes), len(want.Nodes))
	}
	if diff := cmp.Diff(want.NodeTombstones, ev.tombstones, protocmp.Transform()); diff != "" {
		return fmt.Errorf("event %x: tombstones (-want +got):\n%s", b, diff)
	}
	for i, n := range want.Nodes {
		obj, oerr := curator.Object(n)
		if (oerr == nil) != (objErrs[i] == nil) || oerr != nil && oerr.Error() != objErrs[i].Error() {
			return fmt.Errorf("event %x, node %d: error %v, want %v", b, i, objErrs[i], oerr)
		}
		if oerr == nil && !bytes.Equal(obj.JSON(), objs[i]) {
			return fmt.Errorf("event %x, node %d: %s, want %s", b, i, objs[i], obj.JSON())
		}
	}
	return nil
}

// randomEvent returns a WatchEvent's encoding with fields of every kind
// in a random order: nodes (most of them well formed), progress,
// tombstones, unknown fields, and at times a broken end.
func randomEvent(rng *rand.Rand) []byte {
	var b []byte
	for range rng.IntN(8) {
		switch rng.IntN(10) {
		case 0, 1, 2, 3:
			n := curatortest.FullNode(fmt.Sprintf("n%d", rng.IntN(5)))
			if rng.IntN(2) == 0 {
				n = curatortest.Node(fmt.Sprintf("n%d", rng.IntN(5)), 3, "a")
			}
			w, _ := proto.Marshal(n)
			switch rng.IntN(8) {
			case 0: // a string that is not UTF-8
				w = protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff")
			case 1: // cut short
				w = w[:rng.IntN(len(w)+1)]
			}
			b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), w)
		case 4, 5:
			b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), []uint64{0, 1, 2, 1<<64 - 1, 1 << 33}[rng.IntN(5)])
		case 6:
			t := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), fmt.Sprintf("n%d", rng.IntN(5)))
			if rng.IntN(4) == 0 {
				t = protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xc3")
			}
			b = protowire.AppendBytes(protowire.AppendTag(b, 3, protowire.BytesType), t)
		case 7: // an unknown field
			b = protowire.AppendVarint(protowire.AppendTag(b, protowire.Number(4+rng.IntN(50)), protowire.VarintType), rng.Uint64())
		case 8: // a known number of another wire type
			b = protowire.AppendFixed32(protowire.AppendTag(b, protowire.Number(1+rng.IntN(3)), protowire.Fixed32Type), rng.Uint32())
		case 9: // a broken field
			b = append(b, byte(rng.Uint32()))
		}
	}
	return b
}

// TestWireEvent checks reading WatchEvents as wireEvents against
// proto.Unmarshal on random events.
func TestWireEvent(t *testing.T) {
	for seed := range uint64(5000) {
		if err := eventMismatch(randomEvent(rand.New(rand.NewPCG(seed, 0x6576656e74)))); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// FuzzWireEvent checks reading WatchEvents as wireEvents against
// proto.Unmarshal on the fuzzer's bytes.
func FuzzWireEvent(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(randomEvent(rand.New(rand.NewPCG(seed, 0x6576656e74))))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := eventMismatch(b); err != nil {
			t.Fatal(err)
		}
	})
}
