package jsondoc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf8"
)

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
