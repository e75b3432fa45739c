// Package gobjson decodes an encoding/gob stream into JSON without the
// writer's Go types.
//
// encoding/gob can only decode into Go types that match the writer's,
// which a tool that merely shows data (mgmt's World in etcd holds gob of
// its resource types) does not have. A gob stream carries its own type
// definitions, though: every struct's field names and types, every
// slice's and map's element types, and for an interface value the name
// its concrete type was registered under. This package reads those
// definitions and turns each value into JSON:
//
//   - a struct becomes an object of its fields, by name, in the writer's
//     order; gob leaves out fields at their zero value, and so does the
//     object;
//   - an interface value becomes an object whose "type" member is the
//     registered name, followed by the struct's fields (or by "value" for
//     a concrete value that is not a struct); a nil interface is null. No
//     Go field can be called "type" (gob sends exported fields only);
//   - slices and arrays become arrays, maps objects (keys that are not
//     strings are written as their JSON text), []byte a base64 string,
//     numbers numbers (uint64 and int64 exactly), complex numbers
//     {"real", "imag"}, and a value with its own encoding (GobEncoder,
//     BinaryMarshaler) a base64 string of it, TextMarshaler a string.
//
// The layout of the stream is encoding/gob's (see its doc and decoder.go);
// this package follows its decoder step by step. Invalid input is an
// error, never a panic, and no count in the input makes it allocate more
// than the input's size.
package gobjson

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// typeID is gob's type id. Ids below firstUserID are gob's own.
type typeID int64

// gob's predefined type ids (encoding/gob/type.go).
const (
	tBool      typeID = 1
	tInt       typeID = 2
	tUint      typeID = 3
	tFloat     typeID = 4
	tBytes     typeID = 5
	tString    typeID = 6
	tComplex   typeID = 7
	tInterface typeID = 8

	firstUserID typeID = 64
)

// kind is what a user type is on the wire.
type kind int

const (
	kStruct kind = iota + 1
	kSlice
	kArray
	kMap
	kEncoder     // GobEncoder, BinaryMarshaler: opaque bytes
	kTextEncoder // TextMarshaler: text
)

// wireType is the definition of a user type as the stream gives it.
type wireType struct {
	kind   kind
	name   string
	fields []field // kStruct
	elem   typeID  // kSlice, kArray, kMap (the value)
	key    typeID  // kMap
	length int     // kArray
}

type field struct {
	name string
	id   typeID
}

// maxDepth bounds the nesting of values (and so the recursion).
const maxDepth = 1000

// Decode decodes the first value of the gob stream b into JSON. The
// stream may hold more values (a gob encoder's later Encode calls); they
// are ignored.
func Decode(b []byte) ([]byte, error) {
	// JSON is at most a few times the gob (a byte's bool is "false", a
	// short int's escapes); the limit is a backstop against what the
	// format allows but Go never writes.
	d := &decoder{stream: b, types: map[typeID]*wireType{}, maxOut: 64*len(b) + 1<<20}
	var out bytes.Buffer
	d.out = &out
	if err := d.run(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// DecodeBase64 decodes a gob stream wrapped in standard base64 (as mgmt
// stores it), or, if b is not base64, b itself.
func DecodeBase64(b []byte) ([]byte, error) {
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
	if n, err := base64.StdEncoding.Decode(raw, bytes.TrimSpace(b)); err == nil {
		return Decode(raw[:n])
	}
	return Decode(b)
}

// errorf is how the decoder fails: by panicking with a gobError, which
// run recovers. Reading past the end is the commonest failure and every
// read would otherwise need an error check.
type gobError struct{ err error }

func errorf(format string, args ...any) {
	panic(gobError{fmt.Errorf(format, args...)})
}

var errEnd = errors.New("unexpected end of gob data")

// decoder holds the stream, the message being read and the types seen.
type decoder struct {
	stream []byte // what is left of the input after the current message
	buf    []byte // what is left of the current message
	types  map[typeID]*wireType
	out    *bytes.Buffer
	depth  int
	inKey  int // decoding a map key
	maxOut int // the JSON may not grow past this
}

func (d *decoder) run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			ge, ok := r.(gobError)
			if !ok {
				panic(r)
			}
			err = ge.err
		}
	}()
	id := d.typeSequence(false)
	d.value(id, true)
	return nil
}

// recvMessage makes the next count-delimited message of the stream the
// current one.
func (d *decoder) recvMessage() {
	n, rest := readUint(d.stream)
	if n > uint64(len(rest)) {
		errorf("message of %d bytes, %d left", n, len(rest))
	}
	d.buf, d.stream = rest[:n], rest[n:]
}

// typeSequence reads type definitions up to the id of the next value and
// returns it, as encoding/gob's decodeTypeSequence does. Inside an
// interface value, a definition may be followed by the byte count of a
// delimited value, which is skipped.
func (d *decoder) typeSequence(inInterface bool) typeID {
	for {
		if len(d.buf) == 0 {
			if len(d.stream) == 0 {
				panic(gobError{errEnd})
			}
			d.recvMessage()
		}
		id := typeID(d.int())
		if id >= 0 {
			return id
		}
		d.recvType(-id)
		if len(d.buf) > 0 {
			if !inInterface {
				errorf("extra data after the definition of type %d", -id)
			}
			d.uint()
		}
	}
}

// uint reads an unsigned integer from the current message.
func (d *decoder) uint() uint64 {
	x, rest := readUint(d.buf)
	d.buf = rest
	return x
}

// int reads a signed integer.
func (d *decoder) int() int64 {
	x := d.uint()
	if x&1 != 0 {
		return ^int64(x >> 1)
	}
	return int64(x >> 1)
}

// readUint reads gob's unsigned integer from the start of b: a byte below
// 0x80 is the value; otherwise it is minus the number of big-endian bytes
// that follow.
func readUint(b []byte) (uint64, []byte) {
	if len(b) == 0 {
		panic(gobError{errEnd})
	}
	c := b[0]
	if c <= 0x7f {
		return uint64(c), b[1:]
	}
	n := -int(int8(c))
	if n > 8 || n > len(b)-1 {
		errorf("bad unsigned integer")
	}
	var x uint64
	for _, c := range b[1 : n+1] {
		x = x<<8 | uint64(c)
	}
	return x, b[n+1:]
}

// count reads a count of elements, which must fit in what is left of
// the input (every element takes at least a byte; a message may end in
// the middle of a list, when an element brings a new type with it).
func (d *decoder) count() int {
	n := d.uint()
	if left := len(d.buf) + len(d.stream); n > uint64(left) {
		errorf("count %d exceeds the %d bytes left", n, left)
	}
	return int(n)
}

// bytes reads a length and that many bytes of the current message.
func (d *decoder) bytes() []byte {
	n := d.uint()
	if n > uint64(len(d.buf)) {
		errorf("length %d exceeds the %d bytes left", n, len(d.buf))
	}
	b := d.buf[:n]
	d.buf = d.buf[n:]
	return b
}

// recvType reads the definition of type id (a wireType, itself a gob
// struct: ArrayT, SliceT, StructT, MapT, GobEncoderT, BinaryMarshalerT,
// TextMarshalerT, each a struct whose first field is CommonType{Name,
// Id}).
func (d *decoder) recvType(id typeID) {
	if id < firstUserID || d.types[id] != nil {
		errorf("duplicate or reserved type id %d", id)
	}
	w := &wireType{}
	setID := func(dst *typeID) func(int64) { return func(v int64) { *dst = typeID(v) } }
	d.structFields(func(f int) {
		switch f {
		case 0: // ArrayT {CommonType, Elem, Len}
			w.kind = kArray
			d.typeBody(w, setID(&w.elem), func(v int64) { w.length = int(v) })
		case 1: // SliceT {CommonType, Elem}
			w.kind = kSlice
			d.typeBody(w, setID(&w.elem))
		case 2: // StructT {CommonType, Field []fieldType{Name, Id}}
			w.kind = kStruct
			d.structFields(func(g int) {
				switch g {
				case 0:
					w.name = d.common()
				case 1:
					for range d.count() {
						var fl field
						d.structFields(func(h int) {
							switch h {
							case 0:
								fl.name = string(d.bytes())
							case 1:
								fl.id = typeID(d.int())
							default:
								errorf("bad field type")
							}
						})
						w.fields = append(w.fields, fl)
					}
				default:
					errorf("bad struct type")
				}
			})
		case 3: // MapT {CommonType, Key, Elem}
			w.kind = kMap
			d.typeBody(w, setID(&w.key), setID(&w.elem))
		case 4, 5, 6: // GobEncoderT, BinaryMarshalerT, TextMarshalerT {CommonType}
			w.kind = kEncoder
			if f == 6 {
				w.kind = kTextEncoder
			}
			d.typeBody(w)
		default:
			errorf("bad type definition")
		}
	})
	if w.kind == 0 {
		errorf("empty type definition")
	}
	d.types[id] = w
}

// typeBody reads the definition of an array, slice, map or encoder type:
// a struct whose field 0 is the CommonType (its name goes to w.name) and
// whose fields 1, 2 … are integers, handed to ints in order.
func (d *decoder) typeBody(w *wireType, ints ...func(int64)) {
	d.structFields(func(g int) {
		switch {
		case g == 0:
			w.name = d.common()
		case g <= len(ints):
			ints[g-1](d.int())
		default:
			errorf("bad type definition")
		}
	})
}

// common reads a CommonType {Name, Id} and returns the name.
func (d *decoder) common() string {
	var name string
	d.structFields(func(f int) {
		switch f {
		case 0:
			name = string(d.bytes())
		case 1:
			d.int()
		default:
			errorf("bad common type")
		}
	})
	return name
}

// structFields reads the fields of a struct value: for each, the delta
// to its number, then its value, read by fn; a zero delta ends it.
func (d *decoder) structFields(fn func(field int)) {
	d.enter()
	defer d.leave()
	f := -1
	for {
		delta := d.uint()
		if delta == 0 {
			return
		}
		if delta > math.MaxInt32 || f+int(delta) > math.MaxInt32 {
			errorf("bad field delta")
		}
		f += int(delta)
		fn(f)
	}
}

func (d *decoder) enter() {
	d.depth++
	if d.depth > maxDepth {
		errorf("values nest deeper than %d", maxDepth)
	}
}

func (d *decoder) leave() { d.depth-- }

// value writes the value of type id. A value that stands alone (at the
// top of the stream, or in an interface) and is not a struct comes as a
// singleton: a zero field delta first.
func (d *decoder) value(id typeID, alone bool) {
	if alone && !d.isStruct(id) {
		if d.uint() != 0 {
			errorf("non-zero delta for a singleton value")
		}
	}
	d.enter()
	defer d.leave()
	switch id {
	case tBool:
		switch d.uint() {
		case 0:
			d.out.WriteString("false")
		case 1:
			d.out.WriteString("true")
		default:
			errorf("bad bool")
		}
		return
	case tInt:
		d.out.WriteString(strconv.FormatInt(d.int(), 10))
		return
	case tUint:
		d.out.WriteString(strconv.FormatUint(d.uint(), 10))
		return
	case tFloat:
		d.float()
		return
	case tComplex:
		d.out.WriteString(`{"real":`)
		d.float()
		d.out.WriteString(`,"imag":`)
		d.float()
		d.out.WriteByte('}')
		return
	case tBytes:
		d.base64(d.bytes())
		return
	case tString:
		d.str(d.bytes())
		return
	case tInterface:
		d.iface()
		return
	}
	w := d.types[id]
	if w == nil {
		errorf("undefined type id %d", id)
	}
	switch w.kind {
	case kStruct:
		d.object(w)
	case kSlice, kArray:
		n := d.count()
		if w.kind == kArray && n != w.length {
			errorf("array of %d elements for type %s of %d", n, w.name, w.length)
		}
		d.out.WriteByte('[')
		for i := range n {
			if i > 0 {
				d.out.WriteByte(',')
			}
			d.value(w.elem, false)
		}
		d.out.WriteByte(']')
	case kMap:
		d.mapValue(w)
	case kEncoder:
		d.base64(d.bytes())
	case kTextEncoder:
		d.str(d.bytes())
	}
}

func (d *decoder) isStruct(id typeID) bool {
	w := d.types[id]
	return w != nil && w.kind == kStruct
}

// object writes a struct value: the fields sent, by name, in order.
func (d *decoder) object(w *wireType) {
	d.out.WriteByte('{')
	d.members(w, false)
	d.out.WriteByte('}')
}

// members writes the fields of a struct value as members, after a comma
// if more is true.
func (d *decoder) members(w *wireType, more bool) {
	d.structFields(func(f int) {
		if f >= len(w.fields) {
			errorf("field %d of %s, which has %d", f, w.name, len(w.fields))
		}
		if more {
			d.out.WriteByte(',')
		}
		more = true
		d.str([]byte(w.fields[f].name))
		d.out.WriteByte(':')
		d.value(w.fields[f].id, false)
	})
}

// iface writes an interface value: {"type": NAME, fields…} for a struct,
// {"type": NAME, "value": …} for anything else, null for nil.
func (d *decoder) iface() {
	name := d.bytes()
	if len(name) == 0 {
		d.out.WriteString("null")
		return
	}
	id := d.typeSequence(true)
	d.uint() // the byte count of the value, for skipping it
	d.out.WriteString(`{"type":`)
	d.str(name)
	if w := d.types[id]; w != nil && w.kind == kStruct {
		d.members(w, true)
	} else {
		d.out.WriteString(`,"value":`)
		d.value(id, true)
	}
	d.out.WriteByte('}')
}

// mapValue writes a map as an object; a key that is not a string becomes
// its JSON text. A map inside a key cannot come from Go (maps are not
// comparable), and quoting keys within keys would double the output at
// every level: it is refused.
func (d *decoder) mapValue(w *wireType) {
	if d.inKey > 0 {
		errorf("a map inside a map key")
	}
	n := d.count()
	d.out.WriteByte('{')
	for i := range n {
		if i > 0 {
			d.out.WriteByte(',')
		}
		if w.key == tString {
			d.str(d.bytes())
		} else {
			start := d.out.Len()
			d.inKey++
			d.value(w.key, false)
			d.inKey--
			if key := d.out.Bytes()[start:]; key[0] != '"' { // a string key stays as it is
				key = bytes.Clone(key)
				d.out.Truncate(start)
				d.str(key)
			}
		}
		d.out.WriteByte(':')
		d.value(w.elem, false)
		if d.out.Len() > d.maxOut {
			errorf("the JSON would be more than %d bytes", d.maxOut)
		}
	}
	d.out.WriteByte('}')
}

// float writes a gob float: a float64 whose bytes come reversed, so that
// common values are short. NaN and the infinities, which JSON lacks, are
// written as strings.
func (d *decoder) float() {
	f := math.Float64frombits(bits.ReverseBytes64(d.uint()))
	switch {
	case math.IsNaN(f), math.IsInf(f, 0):
		d.str([]byte(strconv.FormatFloat(f, 'g', -1, 64)))
	default:
		d.out.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	}
}

func (d *decoder) base64(b []byte) {
	d.out.WriteByte('"')
	d.out.WriteString(base64.StdEncoding.EncodeToString(b))
	d.out.WriteByte('"')
}

// str writes b as a JSON string; bytes that are not UTF-8 become U+FFFD
// (a Go string may hold any bytes; JSON's may not).
func (d *decoder) str(b []byte) {
	const hex = "0123456789abcdef"
	d.out.WriteByte('"')
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1:
			d.out.WriteString(`\ufffd`)
		case r == '"' || r == '\\':
			d.out.WriteByte('\\')
			d.out.WriteByte(byte(r))
		case r == '\n':
			d.out.WriteString(`\n`)
		case r == '\t':
			d.out.WriteString(`\t`)
		case r == '\r':
			d.out.WriteString(`\r`)
		case r < 0x20:
			d.out.WriteString(`\u00`)
			d.out.WriteByte(hex[r>>4])
			d.out.WriteByte(hex[r&0xf])
		default:
			d.out.Write(b[:size])
		}
		b = b[size:]
	}
	d.out.WriteByte('"')
}
