package curator

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/versionpb"
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
// repeated, and that only in a run. In these messages a repeated field
// has the highest number, so its array ends with the message.
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

// appendElement starts an element of a repeated field: its name (quoted,
// with the '[') before the first, a comma before the others.
func appendElement(b []byte, first bool, quoted string) []byte {
	if first {
		return appendName(b, quoted)
	}
	return append(b, ',')
}

// appendNodeWire appends the JSON of the Node whose encoding is w, as
// appendNode writes it, and returns the node's id; ok is false if w is
// not in the plain encoding (see ObjectOfWire) or appendNode would fail.
func appendNodeWire(b, w []byte) (_ []byte, id string, ok bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			return append(b, '}'), id, !bad
		}
		ok := f.first
		switch {
		case !ok:
		case f.num == 1 && f.typ == protowire.BytesType:
			if ok = utf8.Valid(f.p); ok && len(f.p) > 0 {
				id = string(f.p)
				b = appendQuoted(appendName(b, `"id":`), id)
			}
		case f.num == 2 && f.typ == protowire.BytesType:
			b, ok = appendRolesWire(appendName(b, `"roles":`), f.p)
		case f.num == 3 && f.typ == protowire.BytesType:
			b, ok = appendStatusWire(appendName(b, `"status":`), f.p)
		case f.num == 4 && f.typ == protowire.BytesType:
			b, ok = appendClusternetWire(appendName(b, `"clusternet":`), f.p)
		case f.num == 5 && f.typ == protowire.VarintType:
			b = appendEnumField(b, `"state":`, int32(f.v), commonpb.NodeState_name)
		case f.num == 6 && f.typ == protowire.BytesType:
			b, ok = appendLabelsWire(appendName(b, `"labels":`), f.p)
		default:
			ok = false
		}
		if !ok {
			return b, "", false
		}
	}
}

// The functions below each append one message from its encoding w, and
// report false where appendNodeWire must leave the node to proto.Unmarshal.

// appendStringWire appends the member quoted: p, a string field's bytes,
// if p is set.
func appendStringWire(b []byte, quoted string, p []byte) ([]byte, bool) {
	if !utf8.Valid(p) {
		return b, false
	}
	if len(p) == 0 {
		return b, true
	}
	return appendQuoted(appendName(b, quoted), p), true
}

// appendEmptyWire appends {} for an empty message: one without fields,
// whose encoding w must be empty (unknown fields are left to
// proto.Unmarshal).
func appendEmptyWire(b, w []byte) ([]byte, bool) {
	return append(b, '{', '}'), len(w) == 0
}

func appendRolesWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			return append(b, '}'), !bad
		}
		ok := f.first && f.typ == protowire.BytesType
		switch {
		case !ok:
		case f.num == 1:
			b, ok = appendEmptyWire(appendName(b, `"kubernetes_worker":`), f.p)
		case f.num == 2:
			b, ok = appendConsensusWire(appendName(b, `"consensus_member":`), f.p)
		case f.num == 3:
			b, ok = appendEmptyWire(appendName(b, `"kubernetes_controller":`), f.p)
		default:
			ok = false
		}
		if !ok {
			return b, false
		}
	}
}

func appendConsensusWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	list := false // in the array of the repeated field
	for {
		more, bad := m.next(&f)
		if !more {
			if list {
				b = append(b, ']')
			}
			return append(b, '}'), !bad
		}
		ok := f.typ == protowire.BytesType && (f.first || f.num == 4)
		switch {
		case !ok:
		case f.num == 1:
			b = appendBytesField(b, `"ca_certificate":`, f.p)
		case f.num == 2:
			b = appendBytesField(b, `"peer_certificate":`, f.p)
		case f.num == 3:
			b = appendBytesField(b, `"initial_crl":`, f.p)
		case f.num == 4:
			b, ok = appendPairWire(appendElement(b, f.first, `"peers":[`), f.p, `"name":`, `"url":`)
			list = true
		default:
			ok = false
		}
		if !ok {
			return b, false
		}
	}
}

// appendPairWire appends a message of two string fields, 1 and 2, whose
// quoted names are name1 and name2 (a label's pair, a consensus peer).
func appendPairWire(b, w []byte, name1, name2 string) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			return append(b, '}'), !bad
		}
		ok := f.first && f.typ == protowire.BytesType
		switch {
		case !ok:
		case f.num == 1:
			b, ok = appendStringWire(b, name1, f.p)
		case f.num == 2:
			b, ok = appendStringWire(b, name2, f.p)
		default:
			ok = false
		}
		if !ok {
			return b, false
		}
	}
}

func appendStatusWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			return append(b, '}'), !bad
		}
		ok := f.first && f.typ == protowire.BytesType
		switch {
		case !ok:
		case f.num == 1:
			b, ok = appendStringWire(b, `"external_address":`, f.p)
		case f.num == 2:
			b, ok = appendTimestampWire(appendName(b, `"timestamp":`), f.p)
		case f.num == 3:
			b, ok = appendRunningCuratorWire(appendName(b, `"running_curator":`), f.p)
		case f.num == 4:
			b, ok = appendVersionWire(appendName(b, `"version":`), f.p)
		case f.num == 5:
			b = appendBytesField(b, `"boot_id":`, f.p)
		default:
			ok = false
		}
		if !ok {
			return b, false
		}
	}
}

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
			return appendTimestamp(b, secs, nanos, true)
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

func appendRunningCuratorWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			return append(b, '}'), !bad
		}
		if !f.first || f.typ != protowire.VarintType || f.num != 1 {
			return b, false
		}
		b = appendInt32Field(b, `"port":`, int32(f.v))
	}
}

func appendVersionWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			return append(b, '}'), !bad
		}
		ok := f.first && f.typ == protowire.BytesType
		switch {
		case !ok:
		case f.num == 1:
			b, ok = appendReleaseWire(appendName(b, `"release":`), f.p)
		case f.num == 2:
			b, ok = appendGitWire(appendName(b, `"git_information":`), f.p)
		default:
			ok = false
		}
		if !ok {
			return b, false
		}
	}
}

func appendReleaseWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			return append(b, '}'), !bad
		}
		if !f.first || f.typ != protowire.VarintType {
			return b, false
		}
		switch f.num {
		case 1:
			b = appendInt64Field(b, `"major":`, int64(f.v))
		case 2:
			b = appendInt64Field(b, `"minor":`, int64(f.v))
		case 3:
			b = appendInt64Field(b, `"patch":`, int64(f.v))
		default:
			return b, false
		}
	}
}

func appendGitWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			return append(b, '}'), !bad
		}
		ok := f.first
		switch {
		case !ok:
		case f.num == 1 && f.typ == protowire.BytesType:
			b, ok = appendStringWire(b, `"commit_hash":`, f.p)
		case f.num == 2 && f.typ == protowire.VarintType:
			b = appendUint64Field(b, `"commits_since_release":`, f.v)
		case f.num == 3 && f.typ == protowire.VarintType:
			b = appendEnumField(b, `"build_tree_state":`, int32(f.v), versionpb.Version_GitInformation_BuildTreeState_name)
		default:
			ok = false
		}
		if !ok {
			return b, false
		}
	}
}

func appendClusternetWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	list := false // in the array of the repeated field
	for {
		more, bad := m.next(&f)
		if !more {
			if list {
				b = append(b, ']')
			}
			return append(b, '}'), !bad
		}
		ok := f.typ == protowire.BytesType && (f.first || f.num == 2)
		switch {
		case !ok:
		case f.num == 1:
			b, ok = appendStringWire(b, `"wireguard_pubkey":`, f.p)
		case f.num == 2:
			b, ok = appendCidrWire(appendElement(b, f.first, `"prefixes":[`), f.p)
			list = true
		default:
			ok = false
		}
		if !ok {
			return b, false
		}
	}
}

// appendCidrWire appends a NodeClusterNetworking.Prefix.
func appendCidrWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	for {
		more, bad := m.next(&f)
		if !more {
			return append(b, '}'), !bad
		}
		if !f.first || f.typ != protowire.BytesType || f.num != 1 {
			return b, false
		}
		var ok bool
		if b, ok = appendStringWire(b, `"cidr":`, f.p); !ok {
			return b, false
		}
	}
}

func appendLabelsWire(b, w []byte) ([]byte, bool) {
	b = append(b, '{')
	m := wireMessage{w: w}
	var f wireField
	list := false // in the array of the repeated field
	for {
		more, bad := m.next(&f)
		if !more {
			if list {
				b = append(b, ']')
			}
			return append(b, '}'), !bad
		}
		if f.typ != protowire.BytesType || f.num != 1 {
			return b, false
		}
		var ok bool
		if b, ok = appendPairWire(appendElement(b, f.first, `"pairs":[`), f.p, `"key":`, `"value":`); !ok {
			return b, false
		}
		list = true
	}
}
