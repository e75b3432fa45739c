package server

import (
	"bytes"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/nodewatch/nodewatch/internal/curator"
	"github.com/nodewatch/nodewatch/internal/curator/apipb"
)

// record is a node as the server keeps it: the node its record holds, as
// it is sent, and the health the record carries besides (for GetNodes;
// the Watch wire has none).
type record struct {
	wire   wireNode  // the end of field
	field  fieldNode // wire as Watch sends it
	health curator.Health
}

// newRecord returns the record of a node encoded as wire.
func newRecord(wire wireNode, h curator.Health) *record {
	field := appendNode(make([]byte, 0, nodeSize(wire)), wire)
	return &record{wire: wireNode(field[len(field)-len(wire):]), field: field, health: h}
}

func (r *record) equal(o *record) bool {
	return bytes.Equal(r.wire, o.wire) && r.health.Health == o.health.Health && r.health.Heartbeat.Equal(o.health.Heartbeat)
}

// wireNode is a node as the server keeps and sends it: the deterministic
// binary protobuf encoding of its Node message. A hundred thousand nodes
// cost what their encodings weigh, not what their decoded messages do;
// equal nodes have equal encodings; and a node is encoded once, not once
// for every stream it is sent on.
// It is what curator.EncodeRecordBinary makes of the Node.
type wireNode []byte

// fieldNode is a node as Watch sends it: a wireNode as field 1 (nodes) of
// a WatchEvent, as appendNode makes it. An event of one node is exactly
// these bytes, and a backlog event is a run of them; made once per node,
// they are shared by every stream and never modified.
type fieldNode []byte

// Field numbers of WatchEvent, for events put together from wireNodes.
const (
	fieldNodes          = 1
	fieldNodeTombstones = 3
	fieldTombstoneID    = 1
)

// appendNode appends n to the encoding of a WatchEvent, as one more of its
// nodes.
func appendNode(b []byte, n wireNode) []byte {
	b = protowire.AppendTag(b, fieldNodes, protowire.BytesType)
	return protowire.AppendBytes(b, n)
}

// nodeSize is what appendNode adds.
func nodeSize(n wireNode) int { return protowire.SizeTag(fieldNodes) + protowire.SizeBytes(len(n)) }

// event returns a WatchEvent whose nodes are the encoded nodes in raw (as
// appendNode makes them), followed by the progress field in the last
// event of a backlog: they travel as the message's unknown fields, which
// proto.Marshal writes out as they are, and which a reader decodes as the
// fields they are.
func event(raw []byte) *apipb.WatchEvent {
	ev := &apipb.WatchEvent{}
	ev.ProtoReflect().SetUnknown(protoreflect.RawFields(raw))
	return ev
}

// sharedEvent is an event made once and sent on many streams: the
// WatchEvent event makes of raw, and the bytes codec sends of it (raw,
// without a copy). gRPC's own codec marshals the WatchEvent. Nothing in
// it is modified once made.
type sharedEvent struct {
	*apipb.WatchEvent
	data mem.BufferSlice
}

// share returns the sharedEvent of raw.
func share(raw []byte) *sharedEvent {
	return &sharedEvent{WatchEvent: event(raw), data: mem.BufferSlice{mem.SliceBuffer(raw)}}
}
