package curator_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/versionpb"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/testkit/curatortest"
)

// modelEncode is what EncodeRecord was before it wrote nodes by hand, and
// the model it follows: protojson with the proto names, compacted.
func modelEncode(n *apipb.Node) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("encode node %q: %w", n.GetId(), err)
	}
	return jsondoc.CompactValid(b), nil
}

// checkNodeJSON fails unless the hand-written encoder writes n as the
// model does, and fails where it fails, with its error.
func checkNodeJSON(t *testing.T, n *apipb.Node) {
	t.Helper()
	if err := nodeJSONMismatch(n); err != nil {
		t.Fatal(err)
	}
}

// nodeJSONMismatch says how the hand-written encoder differs from the
// model on n, if it does.
func nodeJSONMismatch(n *apipb.Node) error {
	want, wantErr := modelEncode(n)
	got, ok := curator.AppendNode(nil, n)
	if wantErr != nil {
		if ok {
			return fmt.Errorf("AppendNode(%v) = %s, want a failure: protojson fails with %v", n, got, wantErr)
		}
		if _, err := curator.EncodeRecord(n); err == nil || err.Error() != wantErr.Error() {
			return fmt.Errorf("EncodeRecord(%v): error %v, want protojson's: %v", n, err, wantErr)
		}
		if _, err := curator.Object(n); err == nil {
			return fmt.Errorf("Object(%v): no error, want protojson's: %v", n, wantErr)
		}
		return nil
	}
	if !ok {
		return fmt.Errorf("AppendNode(%v) failed, protojson writes %s", n, want)
	}
	if !bytes.Equal(want, got) {
		return fmt.Errorf("AppendNode(%v) (-protojson +AppendNode):\n%s", n, cmp.Diff(string(want), string(got)))
	}
	if rec, err := curator.EncodeRecord(n); err != nil || !bytes.Equal(rec, want) {
		return fmt.Errorf("EncodeRecord(%v) = %s, %v; want %s", n, rec, err, want)
	}
	if obj, err := curator.Object(n); err != nil || !bytes.Equal(obj.JSON(), want) {
		return fmt.Errorf("Object(%v) = %v, %v; want %s", n, obj, err, want)
	}
	return nil
}

func TestNodeJSON(t *testing.T) {
	ts := func(secs int64, nanos int32) *apipb.Node {
		return &apipb.Node{Id: "n", Status: &commonpb.NodeStatus{Timestamp: &timestamppb.Timestamp{Seconds: secs, Nanos: nanos}}}
	}
	str := func(s string) *apipb.Node {
		return &apipb.Node{Id: s, Labels: &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: s, Value: s}}}}
	}
	unknown := curatortest.FullNode("n")
	unknown.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
	unknown.Status.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 6, protowire.BytesType), "x"))
	unknown.Status.Timestamp.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 1))
	tests := []struct {
		name string
		node *apipb.Node
	}{
		{"nil", nil},
		{"empty", &apipb.Node{}},
		{"every field", curatortest.FullNode("n1")},
		{"empty messages", &apipb.Node{Roles: &commonpb.NodeRoles{ConsensusMember: &commonpb.NodeRoles_ConsensusMember{},
			KubernetesController: &commonpb.NodeRoles_KubernetesController{}},
			Status: &commonpb.NodeStatus{RunningCurator: &commonpb.NodeStatus_RunningCurator{}, Version: &versionpb.Version{
				Release: &versionpb.Version_Release{}, GitInformation: &versionpb.Version_GitInformation{}}},
			Clusternet: &commonpb.NodeClusterNetworking{}, Labels: &commonpb.NodeLabels{}}},
		{"empty, not nil, repeated fields and bytes", &apipb.Node{
			Roles: &commonpb.NodeRoles{ConsensusMember: &commonpb.NodeRoles_ConsensusMember{
				CaCertificate: []byte{}, Peers: []*commonpb.NodeRoles_ConsensusMember_Peer{}}},
			Status:     &commonpb.NodeStatus{BootId: []byte{}},
			Clusternet: &commonpb.NodeClusterNetworking{Prefixes: []*commonpb.NodeClusterNetworking_Prefix{}},
			Labels:     &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{}}}},
		{"nil elements", &apipb.Node{
			Roles:      &commonpb.NodeRoles{ConsensusMember: &commonpb.NodeRoles_ConsensusMember{Peers: []*commonpb.NodeRoles_ConsensusMember_Peer{nil, {Name: "p"}}}},
			Clusternet: &commonpb.NodeClusterNetworking{Prefixes: []*commonpb.NodeClusterNetworking_Prefix{{Cidr: "c"}, nil}},
			Labels:     &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{nil, nil}}}},
		{"unknown enum values", &apipb.Node{State: 99, Status: &commonpb.NodeStatus{Version: &versionpb.Version{
			GitInformation: &versionpb.Version_GitInformation{BuildTreeState: -3}}}}},
		{"extreme numbers", &apipb.Node{Status: &commonpb.NodeStatus{RunningCurator: &commonpb.NodeStatus_RunningCurator{Port: math.MinInt32},
			Version: &versionpb.Version{Release: &versionpb.Version_Release{Major: math.MinInt64, Minor: math.MaxInt64, Patch: -1},
				GitInformation: &versionpb.Version_GitInformation{CommitsSinceRelease: math.MaxUint64}}}}},
		{"unknown fields are left out", unknown},
		{"escapes", str("\"\\/\b\f\n\r\t\x00\x01\x0f\x10\x1f\x7f <>&\u2028\u2029\ufffd é日本\U0001F600")},
		{"invalid UTF-8", str("a\xffb")},
		{"truncated UTF-8", str("\xc3")},
		{"a surrogate in UTF-8", str("\xed\xa0\x80")},
		{"beyond U+10FFFF", str("\xf4\x90\x80\x80")},
		{"invalid UTF-8 in a label only", &apipb.Node{Id: "n", Labels: &commonpb.NodeLabels{Pairs: []*commonpb.NodeLabels_Pair{{Key: "k", Value: "\x80"}}}}},
		{"timestamp: epoch", ts(0, 0)},
		{"timestamp: milliseconds", ts(1767322800, 120_000_000)},
		{"timestamp: microseconds", ts(1767322800, 123_456_000)},
		{"timestamp: nanoseconds", ts(1767322800, 1)},
		{"timestamp: last nanosecond", ts(1767322800, 999_999_999)},
		{"timestamp: a whole second of nanos (refused)", ts(1767322800, 1e9)},
		{"timestamp: first", ts(curator.MinTimestampSeconds, 0)},
		{"timestamp: last", ts(curator.MaxTimestampSeconds, 999_999_999)},
		{"timestamp: last, and a second of nanos (refused)", ts(curator.MaxTimestampSeconds, 1e9)},
		{"timestamp: before the first", ts(curator.MinTimestampSeconds-1, 0)},
		{"timestamp: after the last", ts(curator.MaxTimestampSeconds+1, 0)},
		{"timestamp: negative nanos", ts(0, -1)},
		{"timestamp: too many nanos", ts(0, 1e9+1)},
		{"timestamp: before 1970", ts(-1, 500)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkNodeJSON(t, tt.node)
		})
	}
}

// TestNodeJSONModel checks the hand-written encoder against protojson on
// random nodes. The nodes are made by reflection from the descriptors,
// every field of every message set or not at random, so a field added to
// the schema is set here too, and checked as the encoder writes it (or
// fails the test if its table, nodeSchema, refuses its kind).
func TestNodeJSONModel(t *testing.T) {
	first, n := modelSeeds(t)
	failures := 0
	for seed := first; seed < n; seed++ {
		g := &nodeGen{rng: rand.New(rand.NewPCG(seed, 0x6e6f64656a736f6e))}
		node := g.node()
		if _, err := modelEncode(node); err != nil {
			failures++
		}
		if err := nodeJSONMismatch(node); err != nil {
			t.Fatalf("seed %d: %v\n(replay: NODEWATCH_NODEJSON_SEED=%d go test ./internal/curator -run TestNodeJSONModel)", seed, err, seed)
		}
	}
	// Both ways must be common enough to be tested.
	if cases := n - first; cases >= 1000 && (failures < int(cases)/20 || failures > int(cases)/2) {
		t.Errorf("protojson failed on %d of %d random nodes, want between 5%% and 50%%", failures, cases)
	}
}

// FuzzNodeJSON checks the hand-written encoder against protojson on the
// nodes the fuzzer's bytes make: as the random choices of TestNodeJSONModel's
// generator, and as a binary record (unknown fields and all).
func FuzzNodeJSON(f *testing.F) {
	full, _ := proto.Marshal(curatortest.FullNode("n1"))
	f.Add(full)
	f.Add([]byte("\x05\x01\x02\x03\xff\xfe\x80 \"\\\x00"))
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkNodeJSON(t, (&nodeGen{data: b}).node())
		n := &apipb.Node{}
		if proto.Unmarshal(b, n) == nil {
			checkNodeJSON(t, n)
		}
	})
}

// nodeGen makes random nodes from the descriptors. Its choices come from
// rng, or, if rng is nil, from the bytes of data (zeros once they run
// out), so that a fuzzer steers it.
type nodeGen struct {
	rng  *rand.Rand
	data []byte
}

// u64 returns a random 64-bit number.
func (g *nodeGen) u64() uint64 {
	if g.rng != nil {
		return g.rng.Uint64()
	}
	var x [8]byte
	g.data = g.data[copy(x[:], g.data):]
	return binary.LittleEndian.Uint64(x[:])
}

// intn returns a number in [0, n), n ≤ 256 (one byte of data).
func (g *nodeGen) intn(n int) int {
	if g.rng != nil {
		return g.rng.IntN(n)
	}
	if len(g.data) == 0 {
		return 0
	}
	c := g.data[0]
	g.data = g.data[1:]
	return int(c) % n
}

func (g *nodeGen) node() *apipb.Node {
	n := &apipb.Node{}
	g.message(n.ProtoReflect(), 0)
	return n
}

// message sets each field of m, or not, at random; and, rarely, unknown
// fields.
func (g *nodeGen) message(m protoreflect.Message, depth int) {
	d := m.Descriptor()
	if d.FullName() == "google.protobuf.Timestamp" {
		g.timestamp(m)
		return
	}
	fields := d.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if g.intn(4) == 0 || (depth > 8 && fd.Message() != nil) {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range g.intn(4) {
				if fd.Message() != nil {
					e := l.NewElement()
					g.message(e.Message(), depth+1)
					l.Append(e)
				} else {
					l.Append(g.scalar(fd))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range g.intn(4) {
				k := g.scalar(fd.MapKey()).MapKey()
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					g.message(v.Message(), depth+1)
					mp.Set(k, v)
				} else {
					mp.Set(k, g.scalar(fd.MapValue()))
				}
			}
		case fd.Message() != nil:
			g.message(m.Mutable(fd).Message(), depth+1)
		default:
			m.Set(fd, g.scalar(fd))
		}
	}
	if g.intn(16) == 0 {
		var u []byte
		for range 1 + g.intn(3) {
			num := protowire.Number(1 + g.intn(200))
			if g.intn(2) == 0 {
				u = protowire.AppendVarint(protowire.AppendTag(u, num, protowire.VarintType), g.u64())
			} else {
				u = protowire.AppendString(protowire.AppendTag(u, num, protowire.BytesType), g.str())
			}
		}
		m.SetUnknown(u)
	}
}

// timestamp sets m, a google.protobuf.Timestamp, mostly within protojson's
// range, to whole seconds, milli-, micro- or nanoseconds, and its edges.
func (g *nodeGen) timestamp(m protoreflect.Message) {
	var secs int64
	switch g.intn(10) {
	case 0:
		secs = []int64{0, -1, 1, curator.MinTimestampSeconds, curator.MaxTimestampSeconds, curator.MinTimestampSeconds - 1, curator.MaxTimestampSeconds + 1, math.MinInt64, math.MaxInt64}[g.intn(9)]
	case 1:
		secs = int64(g.u64())
	default:
		secs = curator.MinTimestampSeconds + int64(g.u64()%uint64(curator.MaxTimestampSeconds-curator.MinTimestampSeconds+1))
	}
	var nanos int32
	switch g.intn(10) {
	case 0:
		nanos = []int32{0, 1, 1e9 - 1, 1e9, 1e9 + 1, -1, math.MinInt32, math.MaxInt32}[g.intn(8)]
	case 1, 2:
		nanos = int32(g.u64()%1e3) * 1e6
	case 3, 4:
		nanos = int32(g.u64()%1e6) * 1e3
	case 5:
		nanos = int32(g.u64() % 1e9)
	}
	m.Set(m.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(secs))
	m.Set(m.Descriptor().Fields().ByName("nanos"), protoreflect.ValueOfInt32(nanos))
}

// scalar returns a random value for fd, often an edge of its range.
func (g *nodeGen) scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	edge := g.intn(3) == 0
	x := g.u64()
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(x&1 == 1)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		if edge {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(x)))
		}
		return protoreflect.ValueOfEnum(vals.Get(int(x % uint64(vals.Len()))).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if edge {
			return protoreflect.ValueOfInt32([]int32{0, 1, -1, math.MaxInt32, math.MinInt32}[x%5])
		}
		return protoreflect.ValueOfInt32(int32(x))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if edge {
			return protoreflect.ValueOfUint32([]uint32{0, 1, math.MaxUint32}[x%3])
		}
		return protoreflect.ValueOfUint32(uint32(x))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if edge {
			return protoreflect.ValueOfInt64([]int64{0, 1, -1, math.MaxInt64, math.MinInt64}[x%5])
		}
		return protoreflect.ValueOfInt64(int64(x) >> (x % 64))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if edge {
			return protoreflect.ValueOfUint64([]uint64{0, 1, math.MaxUint64}[x%3])
		}
		return protoreflect.ValueOfUint64(x >> (x % 64))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(math.Float32frombits(uint32(x)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(math.Float64frombits(x))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(g.str())
	case protoreflect.BytesKind:
		b := make([]byte, g.intn(40))
		for i := range b {
			b[i] = byte(g.intn(256))
		}
		return protoreflect.ValueOfBytes(b)
	}
	panic(fmt.Sprintf("no random values of kind %v (%v)", fd.Kind(), fd.FullName()))
}

// str returns a random string, invalid UTF-8 in about one in 40.
func (g *nodeGen) str() string {
	// Plain text, what JSON escapes, what some encoders escape and
	// protojson does not; and, rarely chosen, invalid UTF-8.
	pieces := [...]string{
		"", "a", "metropolis-", "10.0.0.1", "k8s.io/role", " ", "/",
		`"`, `\`, "\x00", "\x01", "\x08", "\x0c", "\n", "\r", "\t", "\x1b", "\x1f", "\x7f",
		"<", ">", "&", "\u2028", "\u2029", "\ufffd", "é", "日本", "\U0001F600", "\u00a0", "\ufeff",
	}
	bad := [...]string{"\xff", "\x80", "\xc3", "\xe6\x97", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf"}
	var b []byte
	for range g.intn(6) {
		switch p := g.intn(200); {
		case p == 0:
			b = append(b, bad[g.intn(len(bad))]...)
		case p < 20:
			b = append(b, string(rune(g.u64()%0x110000))...) // surrogates become U+FFFD
		default:
			b = append(b, pieces[g.intn(len(pieces))]...)
		}
	}
	return string(b)
}

// TestNodeJSONTime checks the timestamps of nodejson.go against time's
// RFC 3339 on random instants (the model test's are mostly far from now).
func TestNodeJSONTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		ts := time.Unix(1_700_000_000+rng.Int64N(1e9), rng.Int64N(1e9)).UTC()
		j, ok := curator.AppendNode(nil, &apipb.Node{Status: &commonpb.NodeStatus{Timestamp: timestamppb.New(ts)}})
		q, found := bytes.CutPrefix(j, []byte(`{"status":{"timestamp":`))
		q, found2 := bytes.CutSuffix(q, []byte(`}}`))
		got, err := strconv.Unquote(string(q))
		if !ok || !found || !found2 || err != nil {
			t.Fatalf("AppendNode of timestamp %v = %s, %v", ts, j, ok)
		}
		back, err := time.Parse(time.RFC3339Nano, got)
		if err != nil || !back.Equal(ts) {
			t.Fatalf("timestamp(%v) = %s, which reads back as %v (%v)", ts, got, back, err)
		}
	}
}

func BenchmarkObject(b *testing.B) {
	nodes := map[string]*apipb.Node{"full": curatortest.FullNode("metropolis-0123456789abcdef0123456789abcdef")}
	sim := curatortest.Node("metropolis-0123456789abcdef0123456789abcdef", commonpb.NodeState_NODE_STATE_UP, "10.1.2.3")
	sim.Roles = &commonpb.NodeRoles{KubernetesWorker: &commonpb.NodeRoles_KubernetesWorker{}}
	sim.Status.Timestamp = timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	nodes["sim"] = sim
	labelled := proto.Clone(nodes["full"]).(*apipb.Node)
	for i := range 12 {
		labelled.Labels.Pairs = append(labelled.Labels.Pairs, &commonpb.NodeLabels_Pair{Key: fmt.Sprintf("example.com/label-%d", i), Value: "some-value"})
	}
	nodes["600B"] = labelled
	for _, name := range []string{"sim", "full", "600B"} {
		n := nodes[name]
		size := 0
		b.Run(name+"/protojson", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				j, err := modelEncode(n)
				if err != nil {
					b.Fatal(err)
				}
				size = len(j)
			}
			b.SetBytes(int64(size))
		})
		b.Run(name+"/Object", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := curator.Object(n); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(size))
		})
		wire, err := proto.Marshal(n)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/Unmarshal+Object", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m := &apipb.Node{}
				if err := proto.Unmarshal(wire, m); err != nil {
					b.Fatal(err)
				}
				if _, err := curator.Object(m); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(size))
		})
		b.Run(name+"/ObjectOfWire", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := curator.ObjectOfWire(wire); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(size))
		})
	}
}
