package etcdkv

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/itchyny/gojq"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/enum"
	"github.com/nodewatch/nodewatch/internal/gobjson"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// ValueMode says how a value's bytes become JSON (nodewatch --value).
type ValueMode int

const (
	// ValueAuto: JSON if the bytes parse as JSON, else a string if they
	// are valid UTF-8, else {"base64": "..."}. Nothing is ever lost.
	ValueAuto ValueMode = iota
	// ValueJSON: the bytes must be JSON; other values are skipped.
	ValueJSON
	// ValueText: the bytes must be UTF-8 and become a string; other values
	// are skipped.
	ValueText
	// ValueBase64: the bytes become a base64 string (as etcdctl -w json).
	ValueBase64
	// ValueGob: the bytes are an encoding/gob stream, raw or wrapped in
	// standard base64 (as mgmt stores its resources), decoded without the
	// writer's types (package gobjson); other values are skipped.
	ValueGob
	// ValueQuery: the bytes are a URL query string (a=1&b=x) and become an
	// object of strings (an array for a name given more than once).
	ValueQuery
)

// valueModeNames are the names of the value modes, as --value takes them.
var valueModeNames = enum.Names[ValueMode]{"auto", "json", "text", "base64", "gob", "query"}

// ValueModes returns the names of the value modes, as --value takes them.
func ValueModes() []string { return valueModeNames.All() }

// ParseValueMode parses the value of --value: auto (or ""), json, text,
// base64, gob or query.
func ParseValueMode(s string) (ValueMode, error) { return valueModeNames.Parse("value mode", s, true) }

// Object returns the object nodewatch prints for kv, as its JSON:
// {create_revision, fields, key, lease, mod_revision, value, version},
// members in that (sorted) order; fields (the key's named segments, see
// KeyPattern) only when there are some. Keys that are not valid UTF-8 come out as
// {"base64": "..."}, as values do under auto. A JSON value is printed as
// stored, compacted: its members in their stored order, its numbers as
// written (none loses precision).
func Object(kv *mvccpb.KeyValue, mode ValueMode, fields []Field) (*jsondoc.Doc, error) {
	return ObjectFrom(kv, mode, fields, nil)
}

// ObjectFrom is Object, given ref, an object Object made for the same key
// before (or nil): when both values are JSON objects, the new one is
// compacted by what changed (jsondoc.AppendCompactIndexedFrom). The
// result is Object's, byte for byte.
func ObjectFrom(kv *mvccpb.KeyValue, mode ValueMode, fields []Field, ref any) (*jsondoc.Doc, error) {
	var refValue []byte
	var refIndex jsondoc.Index
	if d, ok := ref.(*jsondoc.Doc); ok {
		if name, v, x := d.Known(); name == "value" && x != nil {
			refValue, refIndex = v, x
		}
	}
	d, x, b := jsondoc.BlankFor(len(kv.Key) + len(kv.Value) + 128) // the Index is made in the Doc
	// Where each member's key is, as it is written: the object's own
	// Index (jsondoc.Doc.SetMembers).
	members, n := [7]uint16{1}, 1 // create_revision's key, after the brace
	member := func(b []byte) {
		members[n] = uint16(len(b) + 1) // past the comma; wraps past 64 KiB, then not kept
		n++
	}
	b = append(b, `{"create_revision":`...)
	b = appendInt(b, kv.CreateRevision)
	if len(fields) > 0 {
		member(b)
		b = append(b, `,"fields":{`...)
		for i, f := range fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsondoc.AppendString(b, f.Name)
			b = append(b, ':')
			b = appendBytes(b, []byte(f.Value))
		}
		b = append(b, '}')
	}
	member(b)
	b = append(b, `,"key":`...)
	b = appendBytes(b, kv.Key)
	member(b)
	b = append(b, `,"lease":`...)
	b = appendInt(b, kv.Lease)
	member(b)
	b = append(b, `,"mod_revision":`...)
	b = appendInt(b, kv.ModRevision)
	member(b)
	b = append(b, `,"value":`...)
	start := len(b)
	b, x, err := appendValue(b, kv.Value, mode, refValue, refIndex, x)
	if err != nil {
		return nil, err
	}
	end := len(b)
	member(b)
	b = append(b, `,"version":`...)
	b = appendInt(b, kv.Version)
	b = append(b, '}')
	d.Indexed(b, "value", start, end, x)
	if len(b) <= 1<<16-1 {
		d.SetMembers(members[:n])
	}
	return d, nil
}

// Bytes returns b as a string if it is valid UTF-8, else as
// {"base64": "..."}.
func Bytes(b []byte) any {
	if utf8.Valid(b) {
		return string(b)
	}
	return map[string]any{"base64": base64.StdEncoding.EncodeToString(b)}
}

// appendBytes appends the encoding of Bytes(b).
func appendBytes(dst, b []byte) []byte {
	if jsondoc.Plain(b) { // as most keys are: nothing to check or escape
		dst = append(dst, '"')
		dst = append(dst, b...)
		return append(dst, '"')
	}
	if utf8.Valid(b) {
		return jsondoc.AppendString(dst, b)
	}
	return appendMarshal(dst, Bytes(b))
}

// appendInt appends n in decimal, as strconv.AppendInt(dst, n, 10) does,
// for less than strconv's general path costs: a record's revisions,
// version and lease are four of them for every change.
func appendInt(dst []byte, n int64) []byte {
	if n < 0 || n >= 1e18 {
		return strconv.AppendInt(dst, n, 10)
	}
	if n < 10 {
		return append(dst, byte('0'+n))
	}
	var buf [18]byte
	i := len(buf)
	for n >= 10 {
		q := n / 100
		r := n - q*100
		i -= 2
		buf[i], buf[i+1] = twoDigits[2*r], twoDigits[2*r+1]
		n = q
	}
	if n > 0 {
		i--
		buf[i] = byte('0' + n)
	}
	return append(dst, buf[i:]...)
}

const twoDigits = "00010203040506070809" + "10111213141516171819" + "20212223242526272829" +
	"30313233343536373839" + "40414243444546474849" + "50515253545556575859" +
	"60616263646566676869" + "70717273747576777879" + "80818283848586878889" + "90919293949596979899"

// appendMarshal appends v encoded as jq encodes it.
func appendMarshal(dst []byte, v any) []byte {
	out, _ := gojq.Marshal(v) // never fails for strings and maps of strings
	return append(dst, out...)
}

// ValueError is a value that the mode cannot decode, and the modes to try
// instead.
type ValueError struct {
	What string // what the value is not: "gob"
	Try  string // the modes to try: "auto or text"
	// Flag is how the caller names the mode, e.g. "--value"; "" for none.
	Flag string
	Err  error // why, if more is known
}

func (e *ValueError) Error() string {
	try := e.Try
	if e.Flag != "" {
		try = e.Flag + " " + try
	}
	msg := fmt.Sprintf("value is not %s (try %s)", e.What, try)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ValueError) Unwrap() error { return e.Err }

// appendValue appends the JSON of a value's bytes, decoded as mode says,
// and the Index of a JSON object it appends as it is (nil for anything
// else).
func appendValue(dst, b []byte, mode ValueMode, ref []byte, rx, x jsondoc.Index) ([]byte, jsondoc.Index, error) {
	switch mode {
	case ValueGob:
		out, err := gobjson.DecodeBase64(b)
		if err != nil {
			return nil, nil, &ValueError{What: "gob", Try: "auto or text", Err: err}
		}
		return append(dst, out...), nil, nil
	case ValueQuery:
		q, err := url.ParseQuery(string(b))
		if err != nil {
			return nil, nil, fmt.Errorf("value is not a query string: %w", err)
		}
		obj := make(map[string]any, len(q))
		for k, vs := range q {
			if len(vs) == 1 {
				obj[k] = vs[0]
				continue
			}
			list := make([]any, len(vs))
			for i, v := range vs {
				list[i] = v
			}
			obj[k] = list
		}
		return appendMarshal(dst, obj), nil, nil
	case ValueBase64:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"'), nil, nil
	case ValueText:
		if !utf8.Valid(b) {
			return nil, nil, &ValueError{What: "valid UTF-8", Try: "auto or base64"}
		}
		return jsondoc.AppendString(dst, b), nil, nil
	case ValueJSON:
		// Valid UTF-8 and JSON, as nearly every value is: checked in
		// one pass, and only where it differs from ref.
		if out, x, err := jsondoc.AppendCompactIndexedFrom(dst, b, ref, rx, x); err == nil {
			return out, x, nil
		}
		if !utf8.Valid(b) {
			return nil, nil, errors.New("value is not JSON: not valid UTF-8")
		}
		out, err := appendCompact(dst, b)
		if err != nil {
			return nil, nil, fmt.Errorf("value is not JSON: %w", err)
		}
		return out, nil, nil
	}
	if out, x, err := jsondoc.AppendCompactIndexedFrom(dst, b, ref, rx, x); err == nil {
		return out, x, nil // as for ValueJSON
	}
	if !utf8.Valid(b) {
		// As a string, the bad bytes would be replaced: not lossless.
		return appendMarshal(dst, Bytes(b)), nil, nil
	}
	if out, err := appendCompact(dst, b); err == nil {
		return out, nil, nil
	}
	return jsondoc.AppendString(dst, b), nil, nil // valid UTF-8, see above
}

// appendCompact appends b, valid UTF-8 that jsondoc's compaction did not
// take, without insignificant space if it is exactly one JSON value (say,
// nested deeper than jsondoc reads); dst is unchanged when it is not,
// and json.Compact's error says where.
func appendCompact(dst, b []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, b); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}
