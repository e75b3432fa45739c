package curator

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
)

// nodeSchema is the table of the Node message's fields, and of the
// messages in it, that both of a node's JSON writers follow: appendNode,
// which reads the generated structs, and appendNodeWire, which reads the
// binary encoding. It is made from the message descriptors when the
// program starts, so that a field added to the .proto (and regenerated)
// is written by both without a line of code; nodeSchemaErr says why the
// writers cannot (a kind of field they do not write), and then they leave
// every node to protojson.
var nodeSchema, nodeSchemaErr = newSchema(&apipb.Node{})

// A kind is how a field is written: which of the JSON forms of protojson's
// rules (see nodejson.go) it takes.
type kind uint8

const (
	kindString    kind = iota // string: quoted, valid UTF-8
	kindBytes                 // bytes: base64
	kindInt32                 // int32: a number
	kindInt64                 // int64: a quoted decimal
	kindUint64                // uint64: a quoted decimal
	kindEnum                  // an enum: its name, or its number
	kindMessage               // a message: an object
	kindTimestamp             // google.protobuf.Timestamp: RFC 3339
)

// A message is the table of one message's fields.
type message struct {
	fields []field // in number order, the order of their members
}

// A field is one entry of a message's table: what the JSON writers need
// to know of it, from the struct and from the wire.
type field struct {
	name     string           // the member's start: the proto name quoted, and a colon
	num      protowire.Number // its number on the wire
	kind     kind
	list     bool             // repeated (only a kindMessage field is)
	wireType protowire.Type   // VarintType or BytesType
	enum     map[int32]string // an enum's value names by number
	msg      *message         // a message's table (nil for a Timestamp)
	offset   uintptr          // its place in the generated struct
}

// newSchema returns the table of m's message, and those of the messages
// in it; or an error if a field is of a kind the writers do not write.
func newSchema(m proto.Message) (*message, error) {
	return newMessage(m.ProtoReflect().Descriptor(), reflect.TypeOf(m).Elem(), map[protoreflect.FullName]*message{})
}

// newMessage returns the table of the message d, whose generated struct
// is t; done holds the tables made (or being made) so far.
func newMessage(d protoreflect.MessageDescriptor, t reflect.Type, done map[protoreflect.FullName]*message) (*message, error) {
	if m, ok := done[d.FullName()]; ok {
		return m, nil
	}
	m := &message{}
	done[d.FullName()] = m
	// The struct's fields by number, from their protobuf tags
	// ("bytes,1,opt,name=id,proto3").
	structFields := map[protoreflect.FieldNumber]reflect.StructField{}
	for i := range t.NumField() {
		sf := t.Field(i)
		parts := strings.Split(sf.Tag.Get("protobuf"), ",")
		if len(parts) < 2 {
			continue
		}
		if num, err := strconv.Atoi(parts[1]); err == nil {
			structFields[protoreflect.FieldNumber(num)] = sf
		}
	}
	fds := d.Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		sf, ok := structFields[fd.Number()]
		if !ok {
			return nil, fmt.Errorf("%s: no struct field", fd.FullName())
		}
		f, err := newField(fd, sf, done)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fd.FullName(), err)
		}
		m.fields = append(m.fields, f)
	}
	slices.SortFunc(m.fields, func(a, b field) int { return cmp.Compare(a.num, b.num) })
	return m, nil
}

// newField returns the table entry of fd, whose struct field is sf. It
// refuses the fields the writers do not write as protojson does: oneofs,
// maps, scalars with presence (written even when zero), repeated fields
// other than of messages (packed on the wire), the other well-known types
// (JSON of their own), other kinds; and a struct field whose Go type is
// not the kind's, which the writers would misread.
func newField(fd protoreflect.FieldDescriptor, sf reflect.StructField, done map[protoreflect.FullName]*message) (field, error) {
	f := field{
		name:     strconv.Quote(fd.TextName()) + ":",
		num:      fd.Number(),
		list:     fd.IsList(),
		wireType: protowire.VarintType,
		offset:   sf.Offset,
	}
	if fd.ContainingOneof() != nil || fd.IsMap() || fd.IsExtension() {
		return f, fmt.Errorf("a oneof, map or extension field")
	}
	goType := sf.Type // the type of the struct field, or of its elements
	if f.list {
		if goType.Kind() != reflect.Slice {
			return f, fmt.Errorf("a repeated field of Go type %v", sf.Type)
		}
		goType = goType.Elem()
	}
	var want reflect.Kind // goType's kind
	switch k := fd.Kind(); {
	case f.list && (k != protoreflect.MessageKind || fd.Message().FullName().Parent() == "google.protobuf"):
		return f, fmt.Errorf("a repeated field of kind %v", k)
	case fd.HasPresence() && k != protoreflect.MessageKind:
		return f, fmt.Errorf("a scalar with presence")
	case k == protoreflect.StringKind:
		f.kind, f.wireType, want = kindString, protowire.BytesType, reflect.String
	case k == protoreflect.BytesKind:
		f.kind, f.wireType, want = kindBytes, protowire.BytesType, reflect.Slice
	case k == protoreflect.Int32Kind:
		f.kind, want = kindInt32, reflect.Int32
	case k == protoreflect.Int64Kind:
		f.kind, want = kindInt64, reflect.Int64
	case k == protoreflect.Uint64Kind:
		f.kind, want = kindUint64, reflect.Uint64
	case k == protoreflect.EnumKind && fd.Enum().FullName() != "google.protobuf.NullValue":
		f.kind, want = kindEnum, reflect.Int32
		f.enum = map[int32]string{}
		vals := fd.Enum().Values()
		for i := range vals.Len() {
			v := vals.Get(i)
			if _, alias := f.enum[int32(v.Number())]; !alias {
				f.enum[int32(v.Number())] = string(v.Name()) // the first name of a number, as protojson
			}
		}
	case k == protoreflect.MessageKind && fd.Message().FullName() == "google.protobuf.Timestamp":
		if goType != reflect.TypeFor[*timestamppb.Timestamp]() {
			return f, fmt.Errorf("a Timestamp of Go type %v", goType)
		}
		f.kind, f.wireType, want = kindTimestamp, protowire.BytesType, reflect.Pointer
	case k == protoreflect.MessageKind && fd.Message().FullName().Parent() != "google.protobuf":
		if goType.Kind() != reflect.Pointer || goType.Elem().Kind() != reflect.Struct {
			return f, fmt.Errorf("a message of Go type %v", goType)
		}
		f.kind, f.wireType, want = kindMessage, protowire.BytesType, reflect.Pointer
		var err error
		if f.msg, err = newMessage(fd.Message(), goType.Elem(), done); err != nil {
			return f, err
		}
	default:
		return f, fmt.Errorf("a field of kind %v", k)
	}
	if goType.Kind() != want || want == reflect.Slice && goType.Elem().Kind() != reflect.Uint8 {
		return f, fmt.Errorf("of kind %v, of Go type %v", fd.Kind(), sf.Type)
	}
	return f, nil
}
