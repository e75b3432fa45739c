package curator

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// A node's JSON is written here rather than by protojson, whose
// reflection was most of the CPU of listing 100,000 nodes (nodes --once):
// from a table of the messages' fields (nodeSchema, made from the
// descriptors), which appendNode follows through the generated structs
// and appendNodeWire (nodewire.go) through the binary encoding. The bytes
// are protojson's exactly, compacted: jsondoc.CompactValid(protojson.
// MarshalOptions{UseProtoNames: true}.Marshal(n)). TestNodeJSONModel
// checks that against protojson on random nodes made from the message
// descriptors, every field set or not; a field added to the .proto (and
// regenerated) is in the table and written without a line here, and one
// of a kind not written here (newField) sets nodeSchemaErr, which the
// tests fail on. Unknown fields are left out, as protojson leaves them
// out, so a node from a newer Curator needs no other path.
//
// protojson's rules, as it applies them to the kinds of field the table
// holds (proto3; no oneofs, maps or optional scalars):
//   - members in field-number order, named by the proto name;
//   - a scalar only if it is not its zero value, a message only if it is
//     set (an empty one is {}), a repeated field only if it has elements;
//   - enums by name, or as a JSON number when the value has no name;
//   - int64 and uint64 as quoted decimal strings, int32 as a number;
//   - bytes as standard base64 with padding;
//   - google.protobuf.Timestamp as RFC 3339 in UTC with 0, 3, 6 or 9
//     fractional digits and "Z"; protojson fails on seconds outside
//     0001-01-01..9999-12-31 and nanos outside 0..999,999,999;
//   - strings with ", \ and control characters escaped (\b \f \n \r \t,
//     else \u00xx), everything else as it is (DEL, <, >, &, U+2028);
//     protojson fails on invalid UTF-8.
//
// Where protojson fails, appendNode reports it and EncodeRecord asks
// protojson, so that the error is protojson's own.
//
// Every append function takes the buffer and returns it, and those that
// may meet a value protojson refuses return ok false then (what the
// buffer holds is then of no use): no writer struct, whose buffer the
// functions would store through a pointer, at the cost of GC write
// barriers.

// Timestamp's range, as protojson checks it.
const (
	minTimestampSeconds = -62135596800 // 0001-01-01T00:00:00Z
	maxTimestampSeconds = 253402300799 // 9999-12-31T23:59:59Z
)

// appendNode appends n's JSON to b, as protojson (proto names) writes it,
// compacted; ok is false if protojson would fail on n.
func appendNode(b []byte, n *apipb.Node) (_ []byte, ok bool) {
	if nodeSchemaErr != nil {
		return b, false
	}
	return appendMessage(b, nodeSchema, unsafe.Pointer(n))
}

// appendMessage appends the message whose fields are m and whose
// generated struct is at p; nil is written {}, as protojson writes a nil
// element of a repeated field. It reads each field at its offset in the
// struct, as the Go type newField has checked (a message is a pointer, a
// repeated message a slice of pointers, an int64 is read as the uint64 of
// its bits), as protobuf's own fast path does: no reflection and no
// getters, which would cost more than the JSON.
func appendMessage(b []byte, m *message, p unsafe.Pointer) (_ []byte, ok bool) {
	b = append(b, '{')
	if p == nil {
		return append(b, '}'), true
	}
	for i := range m.fields {
		f := &m.fields[i]
		at := unsafe.Add(p, f.offset)
		switch f.kind {
		case kindString:
			s := *(*string)(at)
			if b, ok = appendStringMember(b, f.name, unsafe.Slice(unsafe.StringData(s), len(s))); !ok {
				return b, false
			}
		case kindBytes:
			b = appendBytesMember(b, f.name, *(*[]byte)(at))
		case kindInt32, kindEnum:
			if v := *(*int32)(at); v != 0 {
				b = appendVarintMember(b, f, uint64(v))
			}
		case kindInt64, kindUint64:
			if v := *(*uint64)(at); v != 0 {
				b = appendVarintMember(b, f, v)
			}
		case kindMessage:
			if !f.list {
				if q := *(*unsafe.Pointer)(at); q != nil {
					if b, ok = appendMessage(appendName(b, f.name), f.msg, q); !ok {
						return b, false
					}
				}
				continue
			}
			l := *(*[]unsafe.Pointer)(at)
			for i, q := range l {
				if b, ok = appendMessage(appendElement(b, i == 0, f.name), f.msg, q); !ok {
					return b, false
				}
			}
			if len(l) > 0 {
				b = append(b, ']')
			}
		case kindTimestamp:
			if t := *(**timestamppb.Timestamp)(at); t != nil {
				if b, ok = appendTimestamp(appendName(b, f.name), t.Seconds, t.Nanos); !ok {
					return b, false
				}
			}
		}
	}
	return append(b, '}'), true
}

// appendName starts a member: a comma unless it is the object's first,
// then quoted, its name in quotes (a proto name, which needs no escaping)
// and a colon.
func appendName(b []byte, quoted string) []byte {
	if b[len(b)-1] != '{' { // no value ends with '{'
		b = append(b, ',')
	}
	return append(b, quoted...)
}

// appendElement starts an element of a repeated field whose member starts
// with quoted: the member's name and the '[' before the first, a comma
// before the others.
func appendElement(b []byte, first bool, quoted string) []byte {
	if first {
		return append(appendName(b, quoted), '[')
	}
	return append(b, ',')
}

// appendStringMember appends the member name: s, a string field's bytes
// (a struct's string is read in place), if s is set; ok is false if s is
// not valid UTF-8, which protojson refuses. It quotes s as protojson
// does: ", \ and control characters escaped, every other byte as it is.
// It checks the UTF-8 in the same pass, where a string has a byte beyond
// ASCII.
func appendStringMember(b []byte, name string, s []byte) (_ []byte, ok bool) {
	if len(s) == 0 {
		return b, true
	}
	b = append(appendName(b, name), '"')
	start := 0
	var or byte // every byte of s ORed: ASCII if below utf8.RuneSelf
	for i, c := range s {
		or |= c
		if c < ' ' || c == '"' || c == '\\' {
			b = jsondoc.AppendEscape(append(b, s[start:i]...), c)
			start = i + 1
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"'), or < utf8.RuneSelf || utf8.Valid(s)
}

// appendBytesMember appends the member name: p in base64, if p is set.
func appendBytesMember(b []byte, name string, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	b = append(appendName(b, name), '"')
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, '"')
}

// appendVarintMember appends f's member for v, the value of a field of an
// integer or enum kind as the wire holds it (an int32 sign-extended), if
// it is set: an int32 as a number, 64-bit integers as quoted decimals, an
// enum by name or else as a number.
func appendVarintMember(b []byte, f *field, v uint64) []byte {
	if f.kind == kindInt32 || f.kind == kindEnum {
		v = uint64(int32(v)) // as the generated code reads the wire
	}
	if v == 0 {
		return b
	}
	b = appendName(b, f.name)
	switch f.kind {
	case kindInt64:
		return append(strconv.AppendInt(append(b, '"'), int64(v), 10), '"')
	case kindUint64:
		return append(strconv.AppendUint(append(b, '"'), v, 10), '"')
	case kindEnum:
		if s, ok := f.enum[int32(v)]; ok {
			return append(append(append(b, '"'), s...), '"') // enum names need no escaping
		}
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// appendTimestamp appends the google.protobuf.Timestamp of secs and nanos
// as protojson writes it: "2006-01-02T15:04:05Z", with 3, 6 or 9
// fractional digits if the nanos need them; ok is false outside the range
// protojson writes.
func appendTimestamp(b []byte, secs int64, nanos int32) (_ []byte, ok bool) {
	if secs < minTimestampSeconds || secs > maxTimestampSeconds || nanos < 0 || nanos >= 1e9 {
		return b, false
	}
	// The civil date of the day (Howard Hinnant's days_from_civil,
	// inverted), in the proleptic Gregorian calendar time uses; the range
	// keeps the year within 1..9999.
	days := secs / 86400
	sod := int(secs % 86400)
	if sod < 0 {
		days--
		sod += 86400
	}
	z := days + 719468 // days since 0000-03-01
	era := z / 146097  // z ≥ 0 for year ≥ 1
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
		y++
	}
	b = append(b, '"')
	b = appendDigits(b, int(y), 4)
	b = append(b, '-')
	b = appendDigits(b, int(m), 2)
	b = append(b, '-')
	b = appendDigits(b, int(d), 2)
	b = append(b, 'T')
	b = appendDigits(b, sod/3600, 2)
	b = append(b, ':')
	b = appendDigits(b, sod/60%60, 2)
	b = append(b, ':')
	b = appendDigits(b, sod%60, 2)
	switch ns := int(nanos); {
	case ns == 0:
	case ns%1e6 == 0:
		b = appendDigits(append(b, '.'), ns/1e6, 3)
	case ns%1e3 == 0:
		b = appendDigits(append(b, '.'), ns/1e3, 6)
	default:
		b = appendDigits(append(b, '.'), ns, 9)
	}
	return append(b, 'Z', '"'), true
}

// appendDigits appends v ≥ 0 in n decimal digits, with leading zeros; v
// has at most n digits.
func appendDigits(b []byte, v, n int) []byte {
	for range n {
		b = append(b, '0')
	}
	for i := len(b) - 1; v > 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}
