package jsondoc

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// AppendCompactIndexedFrom is AppendCompactIndexed(dst, src): the same
// bytes, the same Index, an error for the same src (one that is not JSON,
// or not valid UTF-8). ref and rx are another state of the same record, a
// compact object and its Index as AppendCompactIndexed made them, so
// valid UTF-8: the bytes src shares with it are not checked again. Two
// states of a record mostly differ in a few members (a state and a
// heartbeat, while dozens of labels stay as they were): the common prefix
// and suffix of src and ref place the change within a run of top-level
// members, and only those are read again, since the bytes around them
// are those of an object already found valid and compact. Otherwise src
// is compacted whole. TestCompactFromModel and FuzzCompactFrom hold it to
// AppendCompactIndexed.
//
// The Index is appended to x[:0], so that it can be made in the Doc it
// is for (BlankFor).
func AppendCompactIndexedFrom(dst, src, ref []byte, rx, x Index) ([]byte, Index, error) {
	if out, x, ok := appendChanged(dst, src, ref, rx, x[:0]); ok {
		return out, x, nil // an object with members: x is not empty
	}
	return appendCompactIndexed(dst, src, x[:0])
}

// appendChanged is AppendCompactIndexedFrom when src is ref with the
// members k1..k2 replaced by valid members; ok is false otherwise.
func appendChanged(dst, src, ref []byte, rx, x Index) (out []byte, _ Index, ok bool) {
	if len(rx) == 0 || len(ref) < 2 || ref[0] != '{' {
		return dst, nil, false
	}
	p := commonPrefix(src, ref)
	if p == len(src) && p == len(ref) {
		return append(dst, ref...), append(x, rx...), true
	}
	s := commonSuffix(src[p:], ref[p:])
	// The change is ref[p:len(ref)-s], src[p:len(src)-s]. Members k1 to
	// k2 of ref hold it: from k1's key to the comma or brace after k2.
	k1 := len(rx) - 1
	for k1 >= 0 && int(rx[k1]) > p {
		k1--
	}
	if k1 < 0 {
		return dst, nil, false
	}
	k2 := k1
	for k2+1 < len(rx) && int(rx[k2+1])-1 < len(ref)-s {
		k2++
	}
	from, endRef := int(rx[k1]), len(ref)-1
	if k2+1 < len(rx) {
		endRef = int(rx[k2+1]) - 1
	}
	endSrc := endRef + len(src) - len(ref)
	if len(ref)-s > endRef || endSrc < from {
		return dst, nil, false
	}
	// src is ref[:from] + m + ref[endRef:]: valid exactly when m is one
	// or more members, with a key offset each for the Index.
	base := len(dst)
	c := compactor{src: src[from:endSrc], dst: append(dst, src[:from]...), utf8: true}
	x = append(x, rx[:k1]...)
	for {
		c.space()
		if at := len(c.dst) + c.i - c.start - base; at <= 1<<16-1 {
			x = append(x, uint16(at))
		}
		if c.i >= len(c.src) || c.src[c.i] != '"' || !c.str() {
			return dst, nil, false
		}
		c.space()
		if c.i >= len(c.src) || c.src[c.i] != ':' {
			return dst, nil, false
		}
		c.i++
		c.space()
		if !c.value(1) {
			return dst, nil, false
		}
		c.space()
		if c.i == len(c.src) {
			break
		}
		if c.src[c.i] != ',' {
			return dst, nil, false
		}
		c.i++
	}
	out = append(c.dst, c.src[c.start:]...)
	shift := len(out) - base - endRef
	out = append(out, src[endSrc:]...)
	if len(out)-base > 1<<16-1 {
		return out, nil, true // as AppendCompactIndexed: no Index that large
	}
	for _, at := range rx[k2+1:] {
		x = append(x, uint16(int(at)+shift))
	}
	return out, x, true
}

// commonPrefix returns the length of the longest prefix a and b share.
// Equal runs are skipped in blocks (bytes.Equal is vectorized) that double
// while they match, then halve down to the first block of equalBlock bytes
// that differs: a few calls for a run of kilobytes, where a call per
// equalBlock bytes cost more than the comparing. The first difference is
// then found eight bytes at a time.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i, step := 0, equalBlock
	for i+step <= n && bytes.Equal(a[i:i+step], b[i:i+step]) {
		i += step
		step *= 2
	}
	for step > equalBlock {
		step /= 2
		if i+step <= n && bytes.Equal(a[i:i+step], b[i:i+step]) {
			i += step
		}
	}
	for ; i+8 <= n; i += 8 {
		if d := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); d != 0 {
			return i + bits.TrailingZeros64(d)/8
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix returns the length of the longest suffix a and b share,
// as commonPrefix finds a prefix.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i, step := 0, equalBlock
	for i+step <= n && bytes.Equal(a[len(a)-i-step:len(a)-i], b[len(b)-i-step:len(b)-i]) {
		i += step
		step *= 2
	}
	for step > equalBlock {
		step /= 2
		if i+step <= n && bytes.Equal(a[len(a)-i-step:len(a)-i], b[len(b)-i-step:len(b)-i]) {
			i += step
		}
	}
	for ; i+8 <= n; i += 8 {
		if d := binary.LittleEndian.Uint64(a[len(a)-i-8:]) ^ binary.LittleEndian.Uint64(b[len(b)-i-8:]); d != 0 {
			return i + bits.LeadingZeros64(d)/8
		}
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}

// equalBlock is the smallest block commonPrefix and commonSuffix compare
// at once.
const equalBlock = 64
