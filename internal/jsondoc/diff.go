package jsondoc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// Path is a place in a JSON value as jq writes it (path(f), paths,
// getpath): object keys as strings, array indices as ints. The empty
// path is the value itself.
type Path []any

// Diff returns the paths at which a and b differ, so that a user sees
// what an update changed. It works on the encodings, without decoding
// either tree:
//
//   - objects are compared member by member, by key: a key on one side
//     only is a path of its own (added or removed); member order does not
//     count;
//   - arrays of the same length are compared element by element; arrays
//     whose lengths differ are one path, the array's;
//   - any other difference (a scalar, a change of type) is the path of the
//     value.
//
// Values are equal when their encodings are (as Doc.Equal), so 1 and 1.0
// differ. Paths come in jq's sort order: by key in byte order, then by
// index; a path's own members never also appear below it. Diff of equal
// Docs is nil.
func Diff(a, b *Doc) []Path {
	var d Differ
	return d.Diff(a, b)
}

// Differ computes Diff, reusing its memory from one call to the next
// (an encoder diffs every update it writes). The zero value is ready to
// use; it is not safe for concurrent use.
type Differ struct {
	path    []step
	out     []Path
	scratch [][2][]member
	pairs   [][]pair       // per depth: the members that differ (pairwise)
	seen    [][]byte       // the keys of the object being walked (pairwise)
	arena   []any          // the steps of out's paths
	keys    map[string]any // keys seen, as steps: a key's string is made once
	recent  [32]recentKey  // keys found lately, in front of keys
	needle  []byte         // narrow's: a quoted key and its colon
}

// A pair is a member of two objects whose values differ: its key (plain
// ASCII), both values, and each value's Index if its Doc's maker gave
// one.
type pair struct {
	key, a, b []byte
	xa, xb    Index
}

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

// A step is one element of the path being walked: a key (the key's
// bytes, unescaped) or an index.
type step struct {
	key   []byte
	index int
}

// Diff returns Diff(a, b). The result is valid until the next call.
func (d *Differ) Diff(a, b *Doc) []Path {
	d.out, d.arena = d.out[:0], d.arena[:0]
	if d.arena == nil {
		d.arena = make([]any, 0, 16) // so that the root's path is [], not nil
	}
	known := a.known != "" && a.known == b.known && !bytes.Equal(a.json, b.json)
	switch {
	case known && d.made(a, b):
	case known:
		// Both roots are objects that know where the member is.
		wa := newKnowing(a.json, int(a.start), int(a.end), a.index)
		wb := newKnowing(b.json, int(b.start), int(b.end), b.index)
		if xa, xb := a.Members(), b.Members(); xa != nil && xb != nil {
			// The walks read the Indexes from their first member; the
			// known member's Index still goes with it.
			wa.x, wb.x, wa.i, wb.i = xa, xb, 0, 0
		}
		if !d.pairwise(&wa, &wb) {
			d.merge(a.json, b.json)
		}
	case !d.narrow(a.json, b.json, nil):
		d.diff(a.json, b.json, nil, nil)
	}
	if len(d.out) == 0 {
		return nil
	}
	return d.out
}

// made diffs a and b, two Docs that know where their member is, by the
// Indexes that their makers gave of their own objects (SetMembers): the
// keys are the makers' own, distinct and in order, so that the members
// pair up by position and need neither a check for a key given twice nor
// a sort. It returns false, having found nothing, if a and b have no such
// Indexes or their keys differ.
func (d *Differ) made(a, b *Doc) bool {
	xa, xb := a.Members(), b.Members()
	if xa == nil || len(xa) != len(xb) {
		return false
	}
	out, arena := len(d.out), len(d.arena)
	for k := range xa {
		sa, sb := int(xa[k]), int(xb[k])
		ea, eb := xa.end(a.json, k), xb.end(b.json, k)
		if bytes.Equal(a.json[sa:ea], b.json[sb:eb]) {
			continue
		}
		ka, kb := stringEnd(a.json, sa), stringEnd(b.json, sb)
		if !bytes.Equal(a.json[sa:ka], b.json[sb:kb]) {
			d.out, d.arena = d.out[:out], d.arena[:arena]
			return false
		}
		d.path = append(d.path, step{key: a.json[sa+1 : ka-1]})
		if ka+1 == int(a.start) && kb+1 == int(b.start) {
			d.diff(a.json[a.start:a.end], b.json[b.start:b.end], a.index, b.index)
		} else {
			d.diff(a.json[ka+1:ea], b.json[kb+1:eb], nil, nil)
		}
		d.path = d.path[:len(d.path)-1]
	}
	return true
}

func (d *Differ) found() {
	start := len(d.arena)
	for _, s := range d.path {
		if s.key != nil {
			d.arena = append(d.arena, d.key(s.key))
		} else {
			d.arena = append(d.arena, s.index)
		}
	}
	// Capped, so that appending to one path cannot overwrite the next;
	// a grown arena leaves earlier paths on the old array, still valid.
	d.out = append(d.out, Path(d.arena[start:len(d.arena):len(d.arena)]))
}

// key returns k as a path step, the same string for the same key from
// one call to the next: an encoder diffs the same kinds of objects over
// and over. At most 4,096 keys are kept.
func (d *Differ) key(k []byte) any {
	// The keys of one kind of record are few: most are found in a small
	// table by their length and ends, without hashing them.
	var slot int
	if len(k) > 0 {
		slot = (len(k)*7 + int(k[0]) + int(k[len(k)-1])*3) % len(d.recent)
		if r := &d.recent[slot]; r.key == string(k) && r.step != nil {
			return r.step
		}
	}
	v := d.keyStep(k)
	if len(k) > 0 {
		d.recent[slot] = recentKey{v.(string), v}
	}
	return v
}

// A recentKey is a key and its step, as Differ.key last found it.
type recentKey struct {
	key  string
	step any
}

// keyStep is key by way of the map.
func (d *Differ) keyStep(k []byte) any {
	if v, ok := d.keys[string(k)]; ok {
		return v
	}
	if d.keys == nil || len(d.keys) >= 1<<12 {
		d.keys = map[string]any{}
	}
	var v any = string(k)
	d.keys[string(k)] = v
	return v
}

// diff diffs a and b, each indexed by its Index if it is not nil (the
// values of two Docs' known member): the pairwise walk over their
// members then reads only the keys.
func (d *Differ) diff(a, b []byte, xa, xb Index) {
	if bytes.Equal(a, b) {
		return
	}
	if xa != nil && xb != nil && d.narrow(a, b, xa) {
		return // a known member's value: most updates change one value in it
	}
	switch {
	case a[0] == '{' && b[0] == '{':
		wa, wb := newWalker(a, xa), newWalker(b, xb)
		if !d.pairwise(&wa, &wb) {
			d.merge(a, b)
		}
		return
	case a[0] == '[' && b[0] == '[':
		if n := count(a); n != count(b) {
			break
		}
		i, j := skipSpace(a, 1), skipSpace(b, 1)
		for k := 0; i < len(a) && a[i] != ']'; k++ {
			ei, ej := valueEnd(a, i), valueEnd(b, j)
			d.path = append(d.path, step{index: k})
			d.diff(a[i:ei], b[j:ej], nil, nil)
			d.path = d.path[:len(d.path)-1]
			i, j = next(a, ei), next(b, ej)
		}
		return
	}
	d.found()
}

// merge diffs the objects a and b by their members sorted by key.
func (d *Differ) merge(a, b []byte) {
	depth := len(d.path)
	for len(d.scratch) <= depth {
		d.scratch = append(d.scratch, [2][]member{make([]member, 0, 16), make([]member, 0, 16)})
	}
	ma, mb := members(a, d.scratch[depth][0][:0]), members(b, d.scratch[depth][1][:0])
	d.scratch[depth] = [2][]member{ma, mb}
	i, j := 0, 0
	for i < len(ma) || j < len(mb) {
		var c int
		switch {
		case i == len(ma):
			c = 1
		case j == len(mb):
			c = -1
		default:
			c = bytes.Compare(ma[i].key, mb[j].key)
		}
		switch {
		case c < 0:
			d.path = append(d.path, step{key: ma[i].key})
			d.found()
			i++
		case c > 0:
			d.path = append(d.path, step{key: mb[j].key})
			d.found()
			j++
		default:
			d.path = append(d.path, step{key: ma[i].key})
			d.diff(ma[i].val, mb[j].val, nil, nil)
			i++
			j++
		}
		d.path = d.path[:len(d.path)-1]
	}
}

// pairwise diffs the objects that wa and wb walk, whose members come in
// the same order under the same keys, as one serializer writes two states
// of a record: one walk over both, no sorting. It returns false, having
// found nothing, for any other pair, which the sorting merge then diffs:
// keys that differ or come in another order, keys with escapes or bytes
// beyond ASCII (whose encodings may differ for the same key), and a key
// that differs and is given twice (the last counts, and the walk pairs
// each with its namesake).
func (d *Differ) pairwise(wa, wb *walker) bool {
	depth := len(d.path)
	for len(d.pairs) <= depth {
		d.pairs = append(d.pairs, make([]pair, 0, 4))
	}
	if wa.x != nil && wb.x != nil && len(wa.x) == len(wb.x) && wa.i == 0 && wb.i == 0 {
		return d.spans(wa, wb)
	}
	diffs, seen := d.pairs[depth][:0], d.seen[:0]
	for {
		aok, bok := wa.next(), wb.next()
		if !aok || !bok {
			if aok != bok {
				return false
			}
			break
		}
		key := wa.key[1 : len(wa.key)-1]
		if !bytes.Equal(wa.key, wb.key) || !plainASCII(key) {
			return false
		}
		if !bytes.Equal(wa.val, wb.val) {
			diffs = append(diffs, pair{key: key, a: wa.val, b: wb.val, xa: wa.vx, xb: wb.vx})
		}
		seen = append(seen, key)
		wa.vx, wb.vx = nil, nil
	}
	d.seen = seen
	return d.descend(diffs, seen)
}

// spans is pairwise for two indexed objects with as many members: member
// k of each, key and value, is one span of bytes, from its key to the
// comma or brace after it (compact, as indexed objects are), and the
// spans that are equal need no more than their key, read on one side.
func (d *Differ) spans(wa, wb *walker) bool {
	a, b, xa, xb := wa.b, wb.b, wa.x, wb.x
	diffs, seen := d.pairs[len(d.path)][:0], d.seen[:0]
	for k := range xa {
		sa, sb := int(xa[k]), int(xb[k])
		ea, eb := xa.end(a, k), xb.end(b, k) // the comma or the closing brace
		ka, plain := keyEnd(a, sa)
		if !plain {
			return false
		}
		key := a[sa+1 : ka-1]
		seen = append(seen, key)
		if bytes.Equal(a[sa:ea], b[sb:eb]) {
			continue
		}
		kb := stringEnd(b, sb)
		if !bytes.Equal(a[sa:ka], b[sb:kb]) {
			return false
		}
		p := pair{key: key, a: a[ka+1 : ea], b: b[kb+1 : eb]} // past the colon
		if ka+1 == wa.known && wa.known > 0 {
			p.xa = wa.sub
		}
		if kb+1 == wb.known && wb.known > 0 {
			p.xb = wb.sub
		}
		diffs = append(diffs, p)
	}
	d.seen = seen
	return d.descend(diffs, seen)
}

// keyEnd is stringEnd for the key whose opening quote is b[i], and
// whether the key is plain ASCII (plainASCII): most keys are, and one
// search finds their end and that they are.
func keyEnd(b []byte, i int) (end int, plain bool) {
	if k := stringStop(b, i+1, true); k < len(b) && b[k] == '"' {
		return k + 1, true // nothing before the quote stopped the search
	}
	end = stringEnd(b, i)
	return end, plainASCII(b[i+1 : max(end-1, i+1)])
}

// descend ends pairwise: unless a key that differs is given twice (then
// it returns false, having found nothing), it diffs the members that
// differ, in key order.
func (d *Differ) descend(diffs []pair, seen [][]byte) bool {
	depth := len(d.path)
	for _, p := range diffs {
		n := 0
		for _, k := range seen {
			if bytes.Equal(k, p.key) {
				n++
			}
		}
		if n > 1 {
			return false
		}
	}
	if len(diffs) > 1 {
		slices.SortFunc(diffs, func(x, y pair) int { return bytes.Compare(x.key, y.key) })
	}
	d.pairs[depth] = diffs
	for k := range diffs {
		p := &d.pairs[depth][k]
		d.path = append(d.path, step{key: p.key})
		d.diff(p.a, p.b, p.xa, p.xb)
		d.path = d.path[:len(d.path)-1]
	}
	return true
}

// At returns the encoding of the value at p in d, and whether there is
// one: a key that is absent, an index out of range or a step into a
// scalar has none.
func At(d *Doc, p Path) ([]byte, bool) {
	v := d.json
	for _, step := range p {
		found := false
		switch s := step.(type) {
		case string:
			v, found = Field(v, s)
		case int:
			v, found = Element(v, s)
		}
		if !found {
			return nil, false
		}
	}
	return v, true
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

// Len returns the number of elements of the array, or of members (keys)
// of the object, encoded in b; 0 for any other value.
func Len(b []byte) int {
	switch b[0] {
	case '[':
		return count(b)
	case '{':
		return len(members(b, nil))
	}
	return 0
}

// count returns the number of elements of the array in b.
func count(b []byte) int {
	n := 0
	for i := skipSpace(b, 1); i < len(b) && b[i] != ']'; i = next(b, valueEnd(b, i)) {
		n++
	}
	return n
}

// next returns the index of what follows the value that ends at b[i]: the
// next member or element, or the closing bracket.
func next(b []byte, i int) int {
	i = skipSpace(b, i)
	if i < len(b) && b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	return i
}

// decodeKey returns the bytes of the string that the quoted JSON string
// q encodes (never nil).
func decodeKey(q []byte) []byte {
	s := q[1 : len(q)-1]
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return s
	}
	// Escapes to undo, or bytes that are not UTF-8, which decoding turns
	// into U+FFFD (as Decode and encoding/json do).
	var out string
	json.Unmarshal(q, &out) // q is a valid JSON string by construction
	return []byte(out)
}

// valueEnd returns the index just past the JSON value that starts at
// b[i]. b must be valid JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			// Most bytes of a container are none of " { } [ ]: skip
			// them a table lookup at a time.
			for i < len(b) && !structural[b[i]] {
				i++
			}
			if i == len(b) {
				break
			}
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			default: // '}', ']'
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// structural marks the bytes valueEnd stops at inside a container.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// stringEnd returns the index just past the string whose opening quote
// is b[i].
func stringEnd(b []byte, i int) int {
	// Most strings a walk reads (keys, short values) end within the
	// eight bytes after the quote: one word, with no call and no loop.
	if j := i + 1; j+8 <= len(b) {
		if m := stops(binary.LittleEndian.Uint64(b[j:])); m != 0 {
			if k := j + bits.TrailingZeros64(m)/8; b[k] == '"' {
				return k + 1
			}
		}
	}
	for i++; i < len(b); i++ {
		i = stringStop(b, i, false)
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			i++ // the escaped byte
		}
	}
	return len(b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}
