package jsondoc

import (
	"encoding/binary"
	"math/bits"
)

// stringStop returns the index of the first byte at or after s[i] that
// can end a run of a JSON string's plain bytes: a quote, a backslash or a
// control character (below 0x20); len(s) if there is none. It reads eight
// bytes at a time: the strings of records are mostly short, where a call
// of bytes.IndexByte per string cost more than the search.
func stringStop(s []byte, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if m := stops(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return len(s)
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stops marks, in the high bit of each byte of w, the bytes that are a
// quote, a backslash or below 0x20. A byte's mark can be wrong only above
// a true one (the subtraction's borrow), so the lowest mark is exact.
func stops(w uint64) uint64 {
	q := w ^ (ones * '"')
	b := w ^ (ones * '\\')
	return ((q-ones)&^q | (b-ones)&^b | (w-ones*0x20)&^w) & highs
}
