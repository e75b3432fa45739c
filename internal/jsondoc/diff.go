package jsondoc

import (
	"bytes"
	"slices"
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
