package curator

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/fast"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// ErrNodeWire is wrapped by ObjectOfWire's error when its bytes are not a
// Node message (proto.Unmarshal's error follows).
var ErrNodeWire = errors.New("malformed Node message")

// ObjectOfWire returns the id of the node whose binary encoding is wire
// (as a WatchEvent carries it) and its object: Object(n) for n, wire
// unmarshalled. It fails as proto.Unmarshal fails (ErrNodeWire) or as
// Object fails.
//
// Unmarshalling a node cost more than writing its JSON once Object no
// longer used protojson, so the JSON is written straight from the wire:
// appendNodeWire reads the encoding every protobuf marshaller writes
// (fields in number order, each singular field once, no unknown fields)
// and leaves anything else (and any value Object refuses) to
// proto.Unmarshal and Object.
func ObjectOfWire(wire []byte) (id string, obj *jsondoc.Doc, err error) {
	if fast.On(fast.NodeWire) {
		var scratch [scratchSize]byte
		if b, id, ok := appendNodeWire(scratch[:0], wire); ok {
			return id, jsondoc.New(bytes.Clone(b)), nil
		}
	}
	n := &apipb.Node{}
	if err := proto.Unmarshal(wire, n); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrNodeWire, err)
	}
	obj, err = Object(n)
	return n.Id, obj, err
}

// A wireField is one field of a message's encoding.
type wireField struct {
	num   protowire.Number
	typ   protowire.Type // VarintType or BytesType
	v     uint64         // a varint's value
	p     []byte         // a length-delimited field's bytes
	first bool           // the first field of its number (in a run)
}

// A wireMessage steps through the fields of one message in the encoding
// appendNodeWire reads: numbers rising, only a repeated field's number
// repeated, and that only in a run.
type wireMessage struct {
	w    []byte
	last protowire.Number // the number of the field before
}

// next reads the next field into f; more is false at the end, and for a
// malformed field, one out of order or one of a wire type these messages
// do not use (then bad is set).
func (m *wireMessage) next(f *wireField) (more, bad bool) {
	if len(m.w) == 0 {
		return false, false
	}
	num, typ, n := protowire.ConsumeTag(m.w)
	if n < 0 || num < m.last {
		return false, true
	}
	w := m.w[n:]
	switch typ {
	case protowire.VarintType:
		f.v, n = protowire.ConsumeVarint(w)
	case protowire.BytesType:
		f.p, n = protowire.ConsumeBytes(w)
	default:
		return false, true
	}
	if n < 0 {
		return false, true
	}
	f.num, f.typ, f.first = num, typ, num != m.last
	m.w, m.last = w[n:], num
	return true, false
}

// appendNodeWire appends the JSON of the Node whose encoding is w, as
// appendNode writes it, and returns the node's id; ok is false if w is
// not in the plain encoding (see ObjectOfWire) or appendNode would fail.
func appendNodeWire(b, w []byte) (_ []byte, id string, ok bool) {
	if nodeSchemaErr != nil {
		return b, "", false
	}
	if b, ok = appendMessageWire(b, w, nodeSchema); !ok {
		return b, "", false
	}
	// In the plain encoding the id (apipb.Node's field 1) is the first
	// field if it is set, and valid UTF-8 now.
	if num, typ, n := protowire.ConsumeTag(w); num == 1 && typ == protowire.BytesType {
		p, _ := protowire.ConsumeBytes(w[n:])
		id = string(p)
	}
	return b, id, true
}

// appendMessageWire appends the message whose encoding is w and whose
// fields are m, as appendMessage writes it from the struct; ok is false
// where appendNodeWire must leave the node to proto.Unmarshal: a field
// not in m (unknown fields are only proto.Unmarshal's to skip), one of
// another wire type, a singular field given twice, a repeated one given
// apart.
func appendMessageWire(b, w []byte, m *message) (_ []byte, ok bool) {
	b = append(b, '{')
	r := wireMessage{w: w}
	var wf wireField
	i := 0        // m.fields[i] is the field of wf.num, if m has one: numbers rise
	list := false // in the array of a repeated field
	for {
		more, bad := r.next(&wf)
		if list && (!more || wf.first) {
			b, list = append(b, ']'), false
		}
		if !more {
			return append(b, '}'), !bad
		}
		for i < len(m.fields) && m.fields[i].num < wf.num {
			i++
		}
		if i == len(m.fields) {
			return b, false
		}
		f := &m.fields[i]
		if f.num != wf.num || f.wireType != wf.typ || !wf.first && !f.list {
			return b, false
		}
		ok = true
		switch f.kind {
		case kindString:
			b, ok = appendStringMember(b, f.name, wf.p)
		case kindBytes:
			b = appendBytesMember(b, f.name, wf.p)
		case kindInt32, kindInt64, kindUint64, kindEnum:
			b = appendVarintMember(b, f, wf.v)
		case kindMessage:
			if f.list {
				b, list = appendElement(b, wf.first, f.name), true
			} else {
				b = appendName(b, f.name)
			}
			b, ok = appendMessageWire(b, wf.p, f.msg)
		case kindTimestamp:
			b, ok = appendTimestampWire(appendName(b, f.name), wf.p)
		}
		if !ok {
			return b, false
		}
	}
}

// appendTimestampWire appends the google.protobuf.Timestamp whose
// encoding is w (seconds, field 1, and nanos, field 2).
func appendTimestampWire(b, w []byte) ([]byte, bool) {
	var secs int64
	var nanos int32
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			if bad {
				return b, false
			}
			return appendTimestamp(b, secs, nanos)
		}
		switch {
		case !f.first || f.typ != protowire.VarintType:
			return b, false
		case f.num == 1:
			secs = int64(f.v)
		case f.num == 2:
			nanos = int32(f.v)
		default:
			return b, false
		}
	}
}
