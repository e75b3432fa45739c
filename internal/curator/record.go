package curator

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/fast"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// Facts of the Curator's wire and of node records that both ends rely on.
const (
	// DefaultPrefix is the etcd prefix of node records unless configured
	// otherwise; a record's key is the prefix followed by the node id.
	DefaultPrefix = "/nodes/"
	// DefaultPort is the Curator's port on every Metropolis node.
	DefaultPort = 7835
	// MaxEventSize bounds the encoded size (proto.Size) of one backlog
	// WatchEvent, as the Curator does: the backlog is split between nodes
	// into events of at most this size, so only a single node larger than
	// this makes a larger event.
	MaxEventSize = 2 << 20
)

// DecodeRecord decodes the node record stored under the key whose id is id.
//
// A record is the Node message as protobuf JSON (protojson, either field
// naming) or as binary protobuf; both are accepted. JSON is tried when the
// first non-space byte is '{', binary otherwise (and as a fallback, since a
// binary record may start with bytes that look like JSON). Unknown JSON
// fields and enum names are ignored (an unknown enum is left at its zero
// value), so records written with a newer schema still decode.
// The record's id must be set and equal id.
func DecodeRecord(id string, value []byte) (*apipb.Node, error) {
	n := &apipb.Node{}
	if t := bytes.TrimLeft(value, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		err := protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(value, n)
		if err != nil {
			n.Reset()
			if proto.Unmarshal(value, n) != nil {
				return nil, fmt.Errorf("decode node record as protobuf JSON: %w", err)
			}
		}
	} else if err := proto.Unmarshal(value, n); err != nil {
		return nil, fmt.Errorf("decode node record as binary protobuf: %w", err)
	}
	switch {
	case n.GetId() == "":
		return nil, errors.New("node record has no id")
	case n.GetId() != id:
		return nil, fmt.Errorf("node record has id %q, want %q (its key)", n.GetId(), id)
	}
	return n, nil
}

// EncodeRecord encodes n as a node record: compact protobuf JSON with the
// proto field names, which DecodeRecord reads back. The same node always
// gives the same bytes (protojson varies its whitespace from build to
// build on purpose; the record is compacted). It is for writers of
// records, such as the simulator, and makes Object's JSON.
//
// The JSON is written without protojson (see nodejson.go), byte for byte
// as protojson writes it; a node protojson refuses (a string of invalid
// UTF-8, a timestamp out of range) is handed to protojson for its error.
func EncodeRecord(n *apipb.Node) ([]byte, error) {
	if !fast.On(fast.NodeWire) {
		return encodeProtojson(n)
	}
	var scratch [scratchSize]byte
	if b, ok := appendNode(scratch[:0], n); ok {
		return bytes.Clone(b), nil
	}
	return encodeProtojson(n)
}

// scratchSize is the room on the stack in which EncodeRecord and
// ObjectOfWire write a node, whose bytes they then copy to a buffer of
// their size: one allocation, and no room left unused in a node that a
// listing keeps.
const scratchSize = 2048

// encodeProtojson is EncodeRecord by protojson, the model the hand-written
// encoder follows.
func encodeProtojson(n *apipb.Node) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("encode node %q: %w", n.GetId(), err)
	}
	return jsondoc.CompactValid(b), nil // protojson's output is valid JSON
}

// EncodeRecordBinary encodes n as a binary protobuf node record,
// deterministically, which DecodeRecord reads back too.
func EncodeRecordBinary(n *apipb.Node) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("encode node %q: %w", n.GetId(), err)
	}
	return b, nil
}

// Object returns n as nodewatch prints it in an event's object:
// compact protobuf JSON with the proto field names (external_address),
// members in field-number order, enums by name, 64-bit integers as
// strings, bytes as base64, no unpopulated fields. It is the same JSON as
// EncodeRecord's.
func Object(n *apipb.Node) (*jsondoc.Doc, error) {
	b, err := EncodeRecord(n)
	if err != nil {
		return nil, err
	}
	return jsondoc.New(b), nil
}
