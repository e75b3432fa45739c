package etcdwire

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// checkDecoded fails t unless got (decoded in place) says what want (the
// generated code's decoding of the same bytes) says.
func checkDecoded(t *testing.T, want *pb.WatchResponse, got *WatchResponse) {
	t.Helper()
	if got.HasHeader != (want.Header != nil) || got.Revision != want.Header.GetRevision() ||
		got.WatchID != want.WatchId || got.Created != want.Created || got.Canceled != want.Canceled ||
		got.CompactRevision != want.CompactRevision || got.CancelReason != want.CancelReason || got.Fragment != want.Fragment {
		t.Fatalf("header fields: got %+v, want %+v", *got, want)
	}
	if len(got.Events) != len(want.Events) {
		t.Fatalf("%d events, want %d", len(got.Events), len(want.Events))
	}
	for i, e := range want.Events {
		g := got.Events[i]
		kv := e.Kv
		if kv == nil {
			kv = &mvccpb.KeyValue{}
		}
		if g.Type != e.Type || !bytes.Equal(g.KV.Key, kv.Key) || !bytes.Equal(g.KV.Value, kv.Value) ||
			g.KV.CreateRevision != kv.CreateRevision || g.KV.ModRevision != kv.ModRevision ||
			g.KV.Version != kv.Version || g.KV.Lease != kv.Lease {
			t.Fatalf("event %d: got %v %+v, want %v %+v", i, g.Type, g.KV, e.Type, kv)
		}
	}
}

// randomResponse is a WatchResponse as etcd could send it, and some it
// would not (unset and extreme fields, empty and binary keys).
func randomResponse(rng *rand.Rand) *pb.WatchResponse {
	num := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return -rng.Int64()
		}
		return rng.Int64N(1 << uint(rng.IntN(62)+1))
	}
	bs := func() []byte {
		if rng.IntN(5) == 0 {
			return nil
		}
		b := make([]byte, rng.IntN(1<<uint(rng.IntN(14)+1)))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	r := &pb.WatchResponse{WatchId: num(), Created: rng.IntN(4) == 0, Canceled: rng.IntN(8) == 0,
		CompactRevision: num(), Fragment: rng.IntN(8) == 0}
	if rng.IntN(4) != 0 {
		r.Header = &pb.ResponseHeader{ClusterId: uint64(num()), MemberId: uint64(num()), Revision: num(), RaftTerm: uint64(num())}
	}
	if rng.IntN(8) == 0 {
		r.CancelReason = string(bs())
	}
	for range rng.IntN(60) {
		e := &mvccpb.Event{Type: mvccpb.Event_EventType(rng.IntN(2))}
		if rng.IntN(20) != 0 {
			e.Kv = &mvccpb.KeyValue{Key: bs(), CreateRevision: num(), ModRevision: num(), Version: num(), Value: bs(), Lease: num()}
		}
		if rng.IntN(10) == 0 {
			e.PrevKv = &mvccpb.KeyValue{Key: bs(), Value: bs(), ModRevision: num()}
		}
		r.Events = append(r.Events, e)
	}
	return r
}

// pieces splits b as gRPC may hand it over: in buffers of any sizes.
func pieces(rng *rand.Rand, b []byte) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(1<<uint(rng.IntN(16)+1)))
		s = append(s, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	return s
}

// TestWatchCodecModel: responses of every shape, marshalled by etcd's
// generated code and handed over in random pieces, decode in place to
// what the generated code decodes; one WatchResponse is used again and
// again, as the stream does, so nothing of an earlier response may stay.
func TestWatchCodecModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var got WatchResponse
	for i := range 3000 {
		want := randomResponse(rng)
		b, err := want.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := (Codec{}).Unmarshal(pieces(rng, b), &got); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		var back pb.WatchResponse
		if err := back.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		checkDecoded(t, &back, &got)
	}
}

// TestWatchCodecMerges: fields given twice are merged as protobuf says
// (and as the generated code does): a message field's fields merge, a
// scalar's last value counts, unknown fields are skipped.
func TestWatchCodecMerges(t *testing.T) {
	var b []byte
	msgField := func(num protowire.Number, msg []byte) {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, msg)
	}
	varint := func(b []byte, num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
	}
	msgField(1, varint(nil, 3, 5))
	b = varint(b, 2, 9)
	msgField(1, varint(nil, 1, 77)) // the header again: its revision stays
	b = varint(b, 99, 1)            // unknown
	kv1 := varint(protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("k")), 3, 4)
	kv2 := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), []byte("v"))
	ev := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), kv1)
	ev = varint(ev, 1, 1)
	ev = protowire.AppendBytes(protowire.AppendTag(ev, 2, protowire.BytesType), kv2) // the kv again: merged
	msgField(11, ev)
	b = varint(b, 2, 10)
	var want pb.WatchResponse
	if err := want.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	var got WatchResponse
	if err := got.decode(b); err != nil {
		t.Fatal(err)
	}
	checkDecoded(t, &want, &got)
	if got.Revision != 5 || got.WatchID != 10 || string(got.Events[0].KV.Key) != "k" || string(got.Events[0].KV.Value) != "v" {
		t.Fatalf("merged wrong: %+v", got)
	}
}

// field is field num given as a varint (3) or as bytes ("x").
func field(num protowire.Number, varint bool) []byte {
	if varint {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), 3)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), []byte("x"))
}

// wrap is the message msg as field num.
func wrap(num protowire.Number, msg []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), msg)
}

// TestWatchCodecWireTypes: every field of every message, given as a
// varint and as bytes, is decoded or rejected as the generated code
// decodes or rejects it.
func TestWatchCodecWireTypes(t *testing.T) {
	var cases [][]byte
	for num := protowire.Number(1); num <= 12; num++ {
		for _, varint := range []bool{true, false} {
			f := field(num, varint)
			cases = append(cases,
				f,                    // a response's field
				wrap(1, f),           // a header's
				wrap(11, f),          // an event's
				wrap(11, wrap(2, f)), // a key-value's
				wrap(11, wrap(3, f)), // a previous key-value's
			)
		}
	}
	for _, b := range cases {
		var want pb.WatchResponse
		werr := want.Unmarshal(b)
		var got WatchResponse
		gerr := got.decode(b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%x: the generated code says %v, the in-place decoding %v", b, werr, gerr)
		}
		if werr == nil {
			checkDecoded(t, &want, &got)
		}
	}
}

// FuzzWatchCodec: on any bytes, the in-place decoding agrees with the
// generated code: what one decodes the other decodes to the same, and
// what it rejects the other rejects (but for varints longer than 64 bits,
// which the generated code reads and protobuf does not allow, field
// numbers above protobuf's largest, which it cuts to 32 bits, and
// malformed groups, which it skips more loosely).
func FuzzWatchCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		b, _ := randomResponse(rng).Marshal()
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add([]byte{0x5a, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		var want pb.WatchResponse
		werr := want.Unmarshal(b)
		var got WatchResponse
		gerr := got.decode(bytes.Clone(b))
		switch {
		case werr == nil && gerr == nil:
			checkDecoded(t, &want, &got)
		case werr != nil && gerr == nil:
			t.Fatalf("decoded what the generated code rejects (%v): %+v", werr, got)
		case werr == nil && gerr != nil && !overlongVarint(b) && !errors.Is(gerr, errGroup) && !errors.Is(gerr, errFieldNumber):
			t.Fatalf("rejected what the generated code decodes: %v; %s", gerr, fmt.Sprint(&want))
		}
	})
}

// overlongVarint reports whether b has a 10-byte varint whose last byte
// is above 1 (more than 64 bits), anywhere.
func overlongVarint(b []byte) bool {
	run := 0
	for _, c := range b {
		if c&0x80 != 0 {
			run++
			continue
		}
		if run >= 9 && c > 1 || run >= 10 {
			return true
		}
		run = 0
	}
	return false
}

// checkRange fails t unless got (a page decoded in place) says what want
// (the generated code's decoding of the same bytes) says.
func checkRange(t *testing.T, want *pb.RangeResponse, got *RangeResponse) {
	t.Helper()
	if got.HasHeader != (want.Header != nil) || got.Revision != want.Header.GetRevision() || got.More != want.More || got.Count != want.Count {
		t.Fatalf("got revision %d (header %v), more %v, count %d; want %+v", got.Revision, got.HasHeader, got.More, got.Count, want)
	}
	if len(got.KVs) != len(want.Kvs) {
		t.Fatalf("%d key-values, want %d", len(got.KVs), len(want.Kvs))
	}
	for i, kv := range want.Kvs {
		g := got.KVs[i]
		if !bytes.Equal(g.Key, kv.Key) || !bytes.Equal(g.Value, kv.Value) || g.CreateRevision != kv.CreateRevision ||
			g.ModRevision != kv.ModRevision || g.Version != kv.Version || g.Lease != kv.Lease {
			t.Fatalf("key-value %d: got %+v, want %+v", i, g, kv)
		}
	}
}

// randomRange is a RangeResponse as etcd could send it, and some it
// would not, with the fields of randomResponse's key-values.
func randomRange(rng *rand.Rand) *pb.RangeResponse {
	w := randomResponse(rng)
	r := &pb.RangeResponse{Header: w.Header, More: rng.IntN(3) == 0, Count: w.CompactRevision}
	for _, e := range w.Events {
		if e.Kv != nil {
			r.Kvs = append(r.Kvs, e.Kv)
		}
	}
	return r
}

// TestRangeCodecModel: pages of every shape, marshalled by etcd's
// generated code and handed over in random pieces, decode in place to
// what the generated code decodes, each page into a buffer of its own:
// the first page is still right once the second is decoded.
func TestRangeCodecModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	var prev *pb.RangeResponse
	var prevGot *RangeResponse
	for i := range 3000 {
		want := randomRange(rng)
		b, err := want.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got := &RangeResponse{}
		if err := (Codec{}).Unmarshal(pieces(rng, b), got); err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		clear(b) // the page must not point into what gRPC handed over
		var back pb.RangeResponse
		if err := back.Unmarshal(mustMarshal(t, want)); err != nil {
			t.Fatal(err)
		}
		checkRange(t, &back, got)
		if prev != nil {
			checkRange(t, prev, prevGot)
		}
		prev, prevGot = &back, got
	}
}

func mustMarshal(t *testing.T, m interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRangeCodecWireTypes: every field of a page, of its header and of
// a key-value, given as a varint and as bytes, is decoded or rejected as
// the generated code decodes or rejects it; and fields given twice merge
// as it merges them.
func TestRangeCodecWireTypes(t *testing.T) {
	var cases [][]byte
	for num := protowire.Number(1); num <= 8; num++ {
		for _, varint := range []bool{true, false} {
			f := field(num, varint)
			cases = append(cases, f, wrap(1, f), wrap(2, f))
		}
	}
	// Twice: the header merges, a scalar's last counts, each key-value is
	// one more.
	twice := append(wrap(1, field(3, true)), wrap(1, field(1, true))...)
	twice = append(twice, field(3, true)...)
	twice = protowire.AppendVarint(protowire.AppendTag(twice, 3, protowire.VarintType), 0)
	twice = append(twice, wrap(2, wrap(1, []byte("k")))...)
	twice = append(twice, wrap(2, field(5, false))...)
	cases = append(cases, twice)
	for _, b := range cases {
		var want pb.RangeResponse
		werr := want.Unmarshal(b)
		got := &RangeResponse{}
		gerr := got.decode(b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%x: the generated code says %v, the in-place decoding %v", b, werr, gerr)
		}
		if werr == nil {
			checkRange(t, &want, got)
		}
	}
}

// FuzzRangeCodec is FuzzWatchCodec for a listing's pages.
func FuzzRangeCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		b, _ := randomRange(rng).Marshal()
		f.Add(b[:min(len(b), 4096)])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want pb.RangeResponse
		werr := want.Unmarshal(b)
		got := &RangeResponse{}
		gerr := got.decode(bytes.Clone(b))
		switch {
		case werr == nil && gerr == nil:
			checkRange(t, &want, got)
		case werr != nil && gerr == nil:
			t.Fatalf("decoded what the generated code rejects (%v): %+v", werr, got)
		case werr == nil && gerr != nil && !overlongVarint(b) && !errors.Is(gerr, errGroup) && !errors.Is(gerr, errFieldNumber):
			t.Fatalf("rejected what the generated code decodes: %v; %s", gerr, fmt.Sprint(&want))
		}
	})
}
