package curator_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// modelOfWire is what ObjectOfWire follows: proto.Unmarshal, then the
// model of Object.
func modelOfWire(wire []byte) (id string, obj []byte, unmarshalErr, err error) {
	n := &apipb.Node{}
	if err := proto.Unmarshal(wire, n); err != nil {
		return "", nil, err, nil
	}
	obj, err = modelEncode(n)
	return n.Id, obj, nil, err
}

// wireMismatch says how ObjectOfWire differs from the model on wire, if
// it does. If plain is set, wire is a node as proto.Marshal writes it,
// and the JSON must come from the wire, not from the fallback.
func wireMismatch(wire []byte, plain bool) error {
	wantID, want, wantUErr, wantErr := modelOfWire(wire)
	id, obj, err := curator.ObjectOfWire(wire)
	switch {
	case wantUErr != nil:
		if !errors.Is(err, curator.ErrNodeWire) || err.Error() != curator.ErrNodeWire.Error()+": "+wantUErr.Error() {
			return fmt.Errorf("ObjectOfWire(%x) = %q, %v, %v; want proto.Unmarshal's error %v", wire, id, obj, err, wantUErr)
		}
		return nil
	case wantErr != nil:
		if err == nil || err.Error() != wantErr.Error() {
			return fmt.Errorf("ObjectOfWire(%x): error %v, want Object's: %v", wire, err, wantErr)
		}
		return nil
	case err != nil:
		return fmt.Errorf("ObjectOfWire(%x): %v, want %s", wire, err, want)
	case id != wantID:
		return fmt.Errorf("ObjectOfWire(%x): id %q, want %q", wire, id, wantID)
	case !bytes.Equal(obj.JSON(), want):
		return fmt.Errorf("ObjectOfWire(%x) (-model +ObjectOfWire):\n%s", wire, cmp.Diff(string(want), string(obj.JSON())))
	}
	if plain {
		if b, _, ok := curator.AppendNodeWire(nil, wire); !ok || !bytes.Equal(b, want) {
			return fmt.Errorf("AppendNodeWire(%x) = %s, %v; want %s from the wire", wire, b, ok, want)
		}
	}
	return nil
}

func TestObjectOfWire(t *testing.T) {
	field := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	full, err := proto.Marshal(curatortest.FullNode("n1"))
	if err != nil {
		t.Fatal(err)
	}
	status := func(parts ...[]byte) []byte { return field(3, string(cat(parts...))) }
	tests := []struct {
		name  string
		wire  []byte
		plain bool
	}{
		{"empty", nil, true},
		{"every field", full, true},
		{"every field twice: messages merge", cat(full, full), false},
		{"id twice: the last wins", cat(field(1, "a"), field(1, "b")), false},
		{"fields out of order", cat(varint(5, 3), field(1, "a")), false},
		{"zeros written out", cat(field(1, ""), status(field(1, ""), field(5, "")), varint(5, 0)), true},
		{"empty messages", cat(field(2, ""), field(3, ""), field(4, ""), field(6, "")), true},
		{"empty timestamp", status(field(2, "")), true},
		{"unknown field", cat(field(1, "a"), varint(99, 1)), false},
		{"unknown field in an empty message", field(2, string(field(1, string(varint(7, 1))))), false},
		{"unknown enum value", varint(5, 77), true},
		{"negative enum value", varint(5, 1<<64-3), true},
		{"enum beyond int32", varint(5, 1<<40+3), true},
		{"field of the wrong wire type", varint(1, 1), false},
		{"fixed64 field", protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), 1), false},
		{"field number 0", cat(field(0, "a")), false},
		{"truncated", full[:len(full)-1], false},
		{"overlong varint", cat(protowire.AppendTag(nil, 5, protowire.VarintType), []byte{0x83, 0x80, 0x80, 0}), true},
		{"varint overflow", cat(protowire.AppendTag(nil, 5, protowire.VarintType), bytes.Repeat([]byte{0xff}, 10), []byte{1}), false},
		{"invalid UTF-8 in the id", field(1, "a\xffb"), false},
		{"invalid UTF-8 in a label", field(6, string(field(1, string(field(2, "\xc3"))))), false},
		{"timestamp out of range", status(field(2, string(varint(1, 1<<63-1)))), false},
		{"escapes", field(1, "\"\\\x00\x1f\x7f\u2028<>&"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := wireMismatch(tt.wire, tt.plain); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// nodeJSONSeeds is how many random nodes TestNodeJSONModel and
// TestObjectOfWireModel check; NODEWATCH_NODEJSON_SEEDS=N checks N,
// NODEWATCH_NODEJSON_SEED=S only seed S.
const nodeJSONSeeds = 5000

// modelSeeds returns the seeds a model test checks, first to n
// (excluded): nodeJSONSeeds of them, 2000 with -short, or as the
// environment says (see nodeJSONSeeds).
func modelSeeds(t *testing.T) (first, n uint64) {
	t.Helper()
	env := func(name string) (uint64, bool) {
		s := os.Getenv(name)
		if s == "" {
			return 0, false
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v, true
	}
	n = nodeJSONSeeds
	if v, ok := env("NODEWATCH_NODEJSON_SEEDS"); ok {
		n = v
	}
	if testing.Short() {
		n = 2000
	}
	if v, ok := env("NODEWATCH_NODEJSON_SEED"); ok {
		first, n = v, v+1
	}
	return first, n
}

// TestObjectOfWireModel checks ObjectOfWire against proto.Unmarshal and
// protojson on the encodings of random nodes (see TestNodeJSONModel), as
// proto.Marshal writes them (which must be written from the wire) and
// changed: fields shuffled, repeated or cut, bytes changed.
func TestObjectOfWireModel(t *testing.T) {
	first, n := modelSeeds(t)
	plain := 0
	for seed := first; seed < n; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x6e6f646577697265))
		node := (&nodeGen{rng: rng}).node()
		wire, err := proto.MarshalOptions{Deterministic: rng.IntN(2) == 0}.Marshal(node)
		if err != nil {
			continue // invalid UTF-8, which proto.Marshal refuses to write
		}
		// A node with unknown fields is left to the fallback: its
		// encoding is not plain.
		isPlain := !hasUnknown(node.ProtoReflect())
		if isPlain {
			plain++
		}
		if err := wireMismatch(wire, isPlain); err != nil {
			t.Fatalf("seed %d: %v\n(replay: NODEWATCH_NODEJSON_SEED=%d go test ./internal/curator -run TestObjectOfWireModel)", seed, err, seed)
		}
		changed := mutateWire(rng, wire)
		if err := wireMismatch(changed, false); err != nil {
			t.Fatalf("seed %d, changed: %v\n(replay: NODEWATCH_NODEJSON_SEED=%d go test ./internal/curator -run TestObjectOfWireModel)", seed, err, seed)
		}
	}
	if cases := int(n - first); cases >= 1000 && plain < cases/2 {
		t.Errorf("%d of %d random nodes in the plain encoding, want half at least", plain, cases)
	}
}

// FuzzObjectOfWire checks ObjectOfWire against proto.Unmarshal and
// protojson on the fuzzer's bytes as a node's encoding.
func FuzzObjectOfWire(f *testing.F) {
	full, _ := proto.Marshal(curatortest.FullNode("n1"))
	f.Add(full)
	f.Add(append(full, full...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, wire []byte) {
		if err := wireMismatch(wire, false); err != nil {
			t.Fatal(err)
		}
	})
}

// hasUnknown reports whether m or a message in it has unknown fields.
func hasUnknown(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				found = found || hasUnknown(v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			found = hasUnknown(v.Message())
		}
		return !found
	})
	return found
}

// mutateWire returns wire changed at random, in one of the ways a
// marshaller or a broken server might write a node differently.
func mutateWire(rng *rand.Rand, wire []byte) []byte {
	var fields [][]byte
	for w := wire; len(w) > 0; {
		_, _, n := protowire.ConsumeField(w)
		if n < 0 {
			break
		}
		fields = append(fields, w[:n])
		w = w[n:]
	}
	switch rng.IntN(6) {
	case 0: // the top-level fields in another order
		rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
		return bytes.Join(fields, nil)
	case 1: // a field written twice
		if len(fields) > 0 {
			i := rng.IntN(len(fields))
			return bytes.Join(append(fields[:i+1:i+1], fields[i:]...), nil)
		}
		return wire
	case 2: // cut short
		return wire[:rng.IntN(len(wire)+1)]
	case 3: // an unknown field
		return protowire.AppendVarint(protowire.AppendTag(bytes.Clone(wire), protowire.Number(7+rng.IntN(100)), protowire.VarintType), rng.Uint64())
	default: // bytes changed
		out := bytes.Clone(wire)
		for range 1 + rng.IntN(3) {
			if len(out) > 0 {
				out[rng.IntN(len(out))] = byte(rng.Uint32())
			}
		}
		return out
	}
}
