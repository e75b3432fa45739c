package jsondoc

import "bytes"

// Field returns the encoding of the member named key of the object
// encoded in b, and whether there is one; of a key given twice the last
// counts, as when decoding. b must be valid JSON; for anything but an
// object there is no member. Unlike At it allocates nothing for keys
// without escapes or bytes beyond ASCII.
func Field(b []byte, key string) ([]byte, bool) {
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	var val []byte
	found := false
	for i := skipSpace(b, 1); i < len(b) && b[i] != '}'; {
		end := valueEnd(b, i)
		quoted := b[i:end]
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // ':'
		vend := valueEnd(b, i)
		if keyIs(quoted, key) {
			val, found = b[i:vend], true
		}
		i = next(b, vend)
	}
	return val, found
}

// keyIs reports whether the quoted JSON string q encodes key.
func keyIs(q []byte, key string) bool {
	raw := q[1 : len(q)-1]
	if plainASCII(raw) {
		return string(raw) == key
	}
	return string(decodeKey(q)) == key
}

// plainASCII reports whether the inside of a JSON string is its own
// value: no escapes, nothing beyond ASCII.
func plainASCII(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// SameField reports whether the objects a and b have the same encoding
// of the member named key (or both have none): the follower's comparison
// of two states of an etcd key by their values' bytes.
func SameField(a, b *Doc, key string) bool {
	va, oka := a.Member(key)
	vb, okb := b.Member(key)
	return oka == okb && bytes.Equal(va, vb)
}

// Element returns the encoding of element i of the array encoded in b
// (valid JSON), and whether there is one.
func Element(b []byte, i int) ([]byte, bool) {
	var el []byte
	found := false
	n := 0
	Each(b, func(e []byte) bool {
		if n == i {
			el, found = e, true
			return false
		}
		n++
		return true
	})
	return el, found
}

// Each calls fn with the encoding of each element of the array encoded
// in b (valid JSON), in order, until fn returns false.
func Each(b []byte, fn func(e []byte) bool) {
	if len(b) == 0 || b[0] != '[' {
		return
	}
	for i := skipSpace(b, 1); i < len(b) && b[i] != ']'; {
		end := valueEnd(b, i)
		if !fn(b[i:end]) {
			return
		}
		i = next(b, end)
	}
}
