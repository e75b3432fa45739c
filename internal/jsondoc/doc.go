// Package jsondoc holds the objects nodewatch prints as the bytes it prints
// them as, and decodes them for jq only when an expression asks.
//
// An object arrives as a record (an etcd value, a Curator node) and leaves
// as a line of JSON. Decoding every record into a generic tree and
// re-encoding the tree for every line (and for every "prev") cost most of
// the CPU of a live stream and most of the memory of a large listing; most
// objects are never looked at by a jq expression at all. A Doc keeps the
// compact JSON, made once from the record, and makes the tree on first use.
package jsondoc

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/nodewatch/nodewatch/internal/fast"
)

// Doc is a JSON value kept as its compact encoding. Its tree (what jq
// sees) is decoded on the first call of Tree and kept. A Doc is not safe
// for concurrent use: one goroutine decodes it, or none does.
type Doc struct {
	json    []byte
	tree    any
	decoded bool
	// known, if not "", is the one member of the object whose encoding
	// is json[start:end], as its maker said (NewKnowing).
	known      string
	start, end int32
	index      Index // of the known member, if it is an object (NewIndexed)
	// inline holds index when it fits: a record's object and its Index
	// in one allocation, and one place in memory.
	inline [InlineIndex]uint16
	// holds is how many holders must Free it before its memory is
	// made into another Doc: 0 if its maker did not give it (Give,
	// Share), and then it never is.
	holds atomic.Int32
	// members[:nmembers] is the Index of d's own object, when its maker
	// gave one (SetMembers): the Differ walks it without reading the
	// values of members other than the known one.
	members  [8]uint16
	nmembers uint8
}

// InlineIndex is the most members whose Index a Doc holds in itself (a
// maker's buffer for an Index of this size is enough for most records):
// node-like records have a dozen top-level members or fewer.
const InlineIndex = 16

// New returns the Doc of b, which must be one compact, valid JSON value
// (as json.Compact or gojq.Marshal make it); New keeps b.
func New(b []byte) *Doc { return &Doc{json: b} }

// NewKnowing is New for an object b whose only member named name has the
// encoding b[start:end]: its maker (etcdkv.Object, for "value") knows
// where it put it, and Member then finds it without reading b.
func NewKnowing(b []byte, name string, start, end int) *Doc {
	return new(Doc).Indexed(b, name, start, end, nil)
}

// NewIndexed is NewKnowing for a known member that is an object indexed
// by x (AppendCompactIndexed made both).
func NewIndexed(b []byte, name string, start, end int, x Index) *Doc {
	return new(Doc).Indexed(b, name, start, end, x)
}

// Give records that d's maker keeps no reference to d, nor to its
// encoding: whoever it hands d to, and who holds the last reference to
// it, may Free it. It returns d.
func (d *Doc) Give() *Doc {
	d.holds.Store(1)
	return d
}

// Share is Give for a maker that keeps a reference of its own: d's
// memory is made into another Doc only once both the last holder of what
// it handed on and the maker have called Free. (The etcd watcher keeps a
// key's last object of a large value, to decode the next one from.) The
// two may call Free from two goroutines. It returns d.
func (d *Doc) Share() *Doc {
	d.holds.Store(2)
	return d
}

// Free gives v's memory back, for BlankFor to make another Doc with, if
// v is a Doc that its maker gave (Give) and not too large to keep; it
// does nothing with any other v. The caller must keep no reference to v
// after the call, and have held the only one (Give) or one of two
// (Share): a Doc freed is reused. Its encoding's first byte is
// overwritten at once, so that a reference left by mistake to the whole
// reads what is no JSON at all rather than another record; in the tests'
// builds (poisonAll), all of it, so that a reference to any part of it
// does.
//
// Nearly every change to a record leaves one object behind as soon as
// it is applied (the new one, when it is equal or not of interest; the
// old one, once an update or a deletion printed it): made again from the
// same memory, the next objects cost no allocation, and the memory is
// still in cache.
//
// Of a Doc that its maker shares (Share), each holder calls Free once:
// the last call frees it.
func Free(v any) {
	if !fast.On(fast.Pool) {
		return // the garbage collector's, as every Doc is without a pool
	}
	d, ok := v.(*Doc)
	if !ok || d.holds.Load() == 0 || d.holds.Add(-1) > 0 {
		return
	}
	pool := poolFor(cap(d.json))
	if pool == nil {
		return
	}
	b := d.json
	if len(b) > 0 {
		b[0] = freed
	}
	for rest := b; poisonAll && len(rest) > 0; {
		rest = rest[copy(rest, freedBytes[:]):]
	}
	*d = Doc{json: b[:0]}
	pool.Put(d)
}

// freed is what Free overwrites an encoding with: no JSON starts with it.
const freed = '#'

// freedBytes is freed, copied over an encoding a block at a time.
var freedBytes = func() (b [512]byte) {
	for i := range b {
		b[i] = freed
	}
	return b
}()

// freeClasses are the largest buffers of each pool of freed Docs: a
// Doc is made from one of its own class, so that a small record does not
// hold the memory of a large one. maxFree, the last, is the largest
// encoding whose memory Free keeps: larger values are rare.
var freeClasses = [...]int{2 << 10, 8 << 10, maxFree}

const maxFree = 32 << 10

// docs holds the Docs that Free gave back, their buffers with them, by
// class (freeClasses).
var docs [len(freeClasses)]sync.Pool

// poolFor returns the pool of Docs whose buffers are of n bytes'
// capacity, and of BlankFor(n); nil past maxFree.
func poolFor(n int) *sync.Pool {
	for i, top := range freeClasses {
		if n <= top {
			return &docs[i]
		}
	}
	return nil
}

// BlankFor returns a Doc for its Indexed method to make, a buffer of at
// least n bytes' capacity for its encoding, and an empty Index backed by
// the Doc itself, with room for InlineIndex members: an Index appended to
// it (AppendCompactIndexedFrom) costs no allocation of its own, and lives
// next to the Doc in memory. The Doc and the buffer are one that was
// freed (Free), when there is one.
func BlankFor(n int) (*Doc, Index, []byte) {
	if pool := poolFor(n); pool != nil {
		if v := pool.Get(); v != nil {
			d := v.(*Doc)
			b := d.json
			d.json = nil
			if cap(b) < n {
				b = make([]byte, 0, n)
			}
			return d, d.inline[:0], b
		}
	}
	d := new(Doc)
	return d, d.inline[:0], make([]byte, 0, n)
}

// Indexed makes d, new from BlankFor, NewIndexed(b, name, start, end, x),
// and returns it. An x of InlineIndex members or fewer is kept in d.
func (d *Doc) Indexed(b []byte, name string, start, end int, x Index) *Doc {
	d.json = b
	if start < 0 || end > len(b) || start >= end || end > 1<<31-1 {
		return d // a position no maker gives: a Doc as New makes it
	}
	d.known, d.start, d.end = name, int32(start), int32(end)
	switch {
	case x == nil:
	case len(x) <= len(d.inline):
		d.index = d.inline[:copy(d.inline[:], x):len(x)] // in place when x is d's
	default:
		d.index = x
	}
	return d
}

// SetMembers records x, the Index of d's object as its maker wrote it
// (at most 8 members; a larger x is not kept), and returns d. The maker
// promises that the keys are its own: plain ASCII (no escapes), each given
// once, in ascending byte order; the Differ pairs the members of two such
// objects by position (etcdkv.ObjectFrom's keys are fixed names).
func (d *Doc) SetMembers(x Index) *Doc {
	if len(x) <= len(d.members) {
		d.nmembers = uint8(copy(d.members[:], x))
	}
	return d
}

// Members returns the Index of d's object that its maker gave
// (SetMembers); nil when none.
func (d *Doc) Members() Index {
	if d.nmembers == 0 {
		return nil
	}
	return d.members[:d.nmembers:d.nmembers]
}

// Member returns the encoding of the member named name of the object d,
// and whether there is one, as Field(d.JSON(), name) does.
func (d *Doc) Member(name string) ([]byte, bool) {
	if d.known != "" && name == d.known {
		return d.json[d.start:d.end], true
	}
	return Field(d.json, name)
}

// Known returns the member that d's maker said where it is (NewKnowing),
// its encoding, and its Index (nil: none, NewIndexed); "" and nil when
// none.
func (d *Doc) Known() (name string, json []byte, x Index) {
	if d.known == "" {
		return "", nil, nil
	}
	return d.known, d.json[d.start:d.end], d.index
}

// Compact returns the Doc of the JSON text b, compacted. It fails if b is
// not exactly one JSON value.
func Compact(b []byte) (*Doc, error) {
	var buf bytes.Buffer
	buf.Grow(len(b))
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return New(buf.Bytes()), nil
}

// JSON returns the compact encoding. The caller must not modify it.
func (d *Doc) JSON() []byte { return d.json }

// Tree returns the value decoded as encoding/json decodes into an any
// with UseNumber (maps, slices, strings, json.Number, bool, nil), which
// gojq takes as input. The caller must not modify it.
func (d *Doc) Tree() any {
	if !d.decoded {
		// d.json is valid JSON by construction; should it not be, the
		// tree is null rather than a crash in the middle of a watch.
		d.tree, _ = Decode(d.json)
		d.decoded = true
	}
	return d.tree
}

// Equal reports whether d and o have the same encoding (and is what
// go-cmp compares Docs with).
func (d *Doc) Equal(o *Doc) bool { return bytes.Equal(d.json, o.json) }

// TreeOf returns v's tree if v is a *Doc, else v itself.
func TreeOf(v any) any {
	if d, ok := v.(*Doc); ok {
		return d.Tree()
	}
	return v
}

// CompactValid returns b without insignificant space, as json.Compact
// would, for b that is known to be valid JSON (as an encoder's output
// is); it does not check, which makes it a few times faster. It returns b
// itself when there is no such space.
func CompactValid(b []byte) []byte {
	i := 0
	for ; i < len(b); i++ {
		if isSpace(b[i]) || b[i] == '"' {
			break
		}
	}
	var out []byte
	inString, escaped := false, false
	for j := i; j < len(b); j++ {
		c := b[j]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case isSpace(c):
			if out == nil {
				out = append(make([]byte, 0, len(b)), b[:j]...)
			}
			continue
		}
		if out != nil {
			out = append(out, c)
		}
	}
	if out == nil {
		return b
	}
	return out
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
