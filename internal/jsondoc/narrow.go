package jsondoc

import "bytes"

// narrow diffs the objects a and b, two states of one record, by the
// bytes in which they differ, if it can; it returns false, having found
// nothing, if it cannot, and the caller diffs them member by member.
//
// Most updates change one value: a heartbeat's timestamp, a state.
// Everything before the first byte that differs (p) and after the last
// (the common suffix) is the same text in both; if that window lies in
// the value of one member, then in the value of one of its members, and
// so on down to a value that is not an object, then that value is where
// a and b differ, and the other members need not be read at all. xa, if
// not nil, is a's Index.
//
// What makes the answer the member-by-member one:
//
//   - The value found, in a and in b, is one whole JSON value: its end is
//     read in both, and what follows it is as far from the end of a as
//     from the end of b. So a and b are one text with that value
//     replaced, and every member outside it is in both, unchanged.
//   - Each key on the way is plain ASCII, and not given again after its
//     member: of a key given twice the last counts, and a key with
//     escapes may be another spelling of the same key. A key after it
//     that might be the same (a raw match, an escape, bytes beyond ASCII)
//     sends it back to the walk. (One before it is overridden by it, in a
//     and in b alike.)
//
// The first is checked once, for the value found or for the object at
// which the window leaves a single member; a level above it only finds
// the way.
//
// When the value found is an array, or one side's is no object, the
// ordinary diff takes it from there (an array's elements by index, or
// the path of the value).
func (d *Differ) narrow(a, b []byte, xa Index) bool {
	if len(a) == 0 || len(b) == 0 || a[0] != '{' || b[0] != '{' {
		return false
	}
	p := commonPrefix(a, b)
	if p >= len(a) || p >= len(b) {
		return false
	}
	s := commonSuffix(a[p:], b[p:])
	ea := len(a) - s // the window: a[p:ea], and b[p:len(b)-s]
	depth := len(d.path)
	// The object at this level is a[o:oe], and b[o:] (its end in b is
	// read only if needed).
	o, oe := 0, len(a)
	for {
		k, ks, vs, ve, ok := holder(a, o, p, xa)
		if ok && xa != nil { // an indexed member: its end from the Index
			ve = xa.end(a, k)
		}
		var key []byte
		if ok {
			key = a[ks+1 : vs-2]
			ok = plainASCII(key) && !d.twice(a[:oe], o, k, ve, key, xa)
		}
		if !ok || ea > ve {
			// Not inside one member's value: from the member where the
			// window starts, if it is over several, else whole, the walk
			// diffs this level's objects (the root's caller does).
			found := o > 0 && (ok && d.spread(a, b, ks, oe, ea) || d.whole(a, b, o, oe))
			d.path = d.path[:depth]
			return found
		}
		d.path = append(d.path, step{key: key})
		if a[vs] == '{' && b[vs] == '{' { // the window is inside: down one level
			o, oe, xa = vs, ve, nil
			continue
		}
		// The value that holds the window is no object on one side at
		// least: the walk diffs it (an array by its elements).
		found := d.whole(a, b, vs, ve)
		d.path = d.path[:depth]
		return found
	}
}

// whole diffs the values that start at a[o] and b[o], the one in a ending
// at a[oe] and holding the window of narrow (p > o, oe past its end), once
// it has checked that what follows the one in b is what follows the one
// in a: then a and b differ only in them (b's holds b's window), and
// d.path is their path. It returns false, having found nothing, if not:
// where a's value ends, b's may go on (b's window opened a string or a
// member), or end sooner.
func (d *Differ) whole(a, b []byte, o, oe int) bool {
	if ob := valueEnd(b, o); len(a)-oe != len(b)-ob {
		return false
	}
	d.diff(a[o:oe], b[o:len(b)-(len(a)-oe)], nil, nil)
	return true
}

// spread diffs the objects that a[:oe] and b end in, whose members up to
// the one whose key starts at a[ks] (and b[ks]) are the same, and which
// differ from it up to a[ea], past its value: the members from there are
// walked in a and b together until what is left of a is what is left of b
// (past ea, as far from the end of each), and the members that differ are
// diffed in key order, as the walk does. It returns false, having found
// nothing, if the members walked differ in their keys or their order, or
// a key that differs may be given again (as pairwise and twice say). The
// caller has checked with twice the key of the member at a[ks].
func (d *Differ) spread(a, b []byte, ks, oe, ea int) bool {
	depth := len(d.path)
	for len(d.pairs) <= depth {
		d.pairs = append(d.pairs, make([]pair, 0, 4))
	}
	wa, wb := walker{b: a, i: ks}, walker{b: b, i: ks}
	diffs, seen := d.pairs[depth][:0], d.seen[:0]
	for wa.i < ea || len(a)-wa.i != len(b)-wb.i {
		if !wa.next() || !wb.next() {
			return false // an object ended inside the window
		}
		key := wa.key[1 : len(wa.key)-1]
		if !bytes.Equal(wa.key, wb.key) || !plainASCII(key) {
			return false
		}
		if !bytes.Equal(wa.val, wb.val) {
			diffs = append(diffs, pair{key: key, a: wa.val, b: wb.val})
		}
		seen = append(seen, key)
	}
	// The members after those walked, the same in a and b, must not give
	// a key that differs again. (They hold no escape: twice found none
	// after the first member walked.)
	rest := a[wa.i:oe]
	for _, p := range diffs {
		if d.keyIn(rest, p.key) {
			return false
		}
	}
	d.seen = seen
	return d.descend(diffs, seen)
}

// holder finds the member of the object at a[o] whose value holds a[p]:
// its position among the members, where its key starts (the quote), where
// its value starts, and, if the object is not indexed (x nil), where it
// ends (0 for an indexed object: its Index has it). ok is false when p is
// in no member's value (in a key, between members, past the last).
func holder(a []byte, o, p int, x Index) (k, ks, vs, ve int, ok bool) {
	if x != nil { // the members' keys from the Index
		k = len(x) - 1
		for k >= 0 && o+int(x[k]) > p {
			k--
		}
		if k < 0 {
			return 0, 0, 0, 0, false
		}
		ks = o + int(x[k])
		ke := stringEnd(a, ks)
		if ke >= len(a) || a[ke] != ':' || ke+1 > p {
			return 0, 0, 0, 0, false
		}
		return k, ks, ke + 1, 0, true
	}
	for i := o + 1; i < p && a[i] == '"'; k++ {
		ke := stringEnd(a, i)
		if ke >= len(a) || a[ke] != ':' || ke+1 > p {
			return 0, 0, 0, 0, false
		}
		end := valueEnd(a, ke+1)
		if end > p {
			return k, i, ke + 1, end, true
		}
		if end >= len(a) || a[end] != ',' {
			return 0, 0, 0, 0, false
		}
		i = end + 1
	}
	return 0, 0, 0, 0, false
}

// twice reports whether the object at a[o], which ends a, may give key
// (plain ASCII, the key of its member k, whose value ends at a[ve]) again
// after member k: then the last one counts. (One before k is overridden
// by k, in a and in b alike.) A key that is key, or may be key spelt
// otherwise, counts.
// Without an Index, the members after k are not read: key quoted and
// followed by a colon anywhere after k (also inside a value), or any
// escape, counts.
func (d *Differ) twice(a []byte, o, k, ve int, key []byte, x Index) bool {
	if x != nil {
		for _, at := range x[k+1:] {
			if keyAt(a, o+int(at), key) != notKey {
				return true
			}
		}
		return false
	}
	rest := a[ve:]
	return bytes.IndexByte(rest, '\\') >= 0 || d.keyIn(rest, key)
}

// keyIn reports whether b holds key quoted and followed by a colon, as a
// member's key is written (or a string in a value that reads so).
func (d *Differ) keyIn(b, key []byte) bool {
	d.needle = append(append(append(d.needle[:0], '"'), key...), '"', ':')
	return bytes.Contains(b, d.needle)
}
