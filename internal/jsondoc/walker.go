package jsondoc

import (
	"bytes"
	"slices"
)

// A walker steps through the members of an object in document order:
// from the object's Index when it has one, else by scanning, reading past
// the known member's value (b[known:end], whose Index is sub) without
// scanning it; either way the known member's value comes with sub. next
// leaves the member it reached in key, val and vx.
type walker struct {
	b          []byte
	x          Index
	known, end int
	sub        Index
	i          int // the next member: an offset in b, or an entry of x

	key, val []byte // the member reached: its quoted key and its value
	vx       Index  // val's Index, if known
}

// newWalker walks the object b, indexed by x if x is not nil.
func newWalker(b []byte, x Index) walker {
	if x != nil {
		return walker{b: b, x: x}
	}
	return walker{b: b, i: skipSpace(b, 1)}
}

// newKnowing walks the object b whose member with the value b[known:end]
// is known, that value indexed by sub; by scanning, unless x is set to
// the object's Index.
func newKnowing(b []byte, known, end int, sub Index) walker {
	return walker{b: b, known: known, end: end, sub: sub, i: skipSpace(b, 1)}
}

// next moves to the next member; it returns false after the last.
func (w *walker) next() bool {
	if x := w.x; x != nil {
		if w.i == len(x) {
			return false
		}
		k, ks := w.i, int(x[w.i])
		w.i++
		ke := stringEnd(w.b, ks)
		w.key, w.val = w.b[ks:ke], x.value(w.b, k, ke)
		if ke+1 == w.known && w.known > 0 {
			w.vx = w.sub
		}
		return true
	}
	b, i := w.b, w.i
	if i >= len(b) || b[i] == '}' {
		return false
	}
	ke := stringEnd(b, i)
	vs := ke + 1 // past ':', in compact JSON
	if b[ke] != ':' || isSpace(b[vs]) {
		vs = skipSpace(b, skipSpace(b, ke)+1)
	}
	w.key = b[i:ke]
	if vs == w.known && vs > 0 {
		w.i = next(b, w.end)
		w.val, w.vx = b[vs:w.end], w.sub
		return true
	}
	ve := valueEnd(b, vs)
	w.i = next(b, ve)
	w.val = b[vs:ve]
	return true
}

// A member is one key (unescaped) and the encoding of its value.
type member struct {
	key []byte
	val []byte
}

// members appends the members of the object encoded in b to ms, sorted
// by key; of a key given twice the last one counts, as when decoding.
func members(b []byte, ms []member) []member {
	w := newWalker(b, nil)
	for w.next() {
		ms = append(ms, member{key: decodeKey(w.key), val: w.val})
	}
	if !slices.IsSortedFunc(ms, byKey) {
		slices.SortStableFunc(ms, byKey)
	}
	// Of equal keys (now adjacent, in their order) keep the last.
	out := ms[:0]
	for k, m := range ms {
		if k+1 < len(ms) && bytes.Equal(ms[k+1].key, m.key) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func byKey(x, y member) int { return bytes.Compare(x.key, y.key) }
