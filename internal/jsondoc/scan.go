package jsondoc

import (
	"encoding/binary"
	"math/bits"
)

// stringStop returns the index of the first byte at or after s[i] that
// can end a run of a JSON string's plain bytes: a quote, a backslash or a
// control character (below 0x20), and with high a byte of 0x80 or more
// (where a check of UTF-8 begins); len(s) if there is none. It reads eight
// bytes at a time: the strings of records are mostly short, where a call
// of bytes.IndexByte per string cost more than the search.
func stringStop(s []byte, i int, high bool) int {
	var hm uint64 // the high bits of the bytes that stop, with high
	if high {
		hm = highs
	}
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64(s[i:])
		if m := stops(w) | w&hm; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 || high && c >= 0x80 {
			return i
		}
	}
	return len(s)
}

// numberEnd reads the number at s[i], which is '-' or a digit, as JSON's
// grammar has it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. It
// returns where the number ends; or, if there is none, where it failed
// and why (Decode's error says it). Decode reads strings, AppendCompact
// bytes: one grammar for both.
func numberEnd[S string | []byte](s S, i int) (end int, bad string) {
	if s[i] == '-' {
		i++
	}
	if i < len(s) && s[i] == '0' {
		i++
	} else if j := digitsEnd(s, i); j > i {
		i = j
	} else {
		return i, "invalid number"
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := digitsEnd(s, i)
		if j == i {
			return i, "invalid number: no digit after the decimal point"
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digitsEnd(s, i)
		if j == i {
			return i, "invalid number: no digit in the exponent"
		}
		i = j
	}
	return i, ""
}

// digitsEnd returns where the decimal digits at s[i] end.
func digitsEnd[S string | []byte](s S, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// Plain reports whether s is all printable ASCII other than a quote or a
// backslash: a JSON string's bytes as they are, with nothing to escape.
func Plain(s []byte) bool {
	// plainLen's test, a word at a time with one load each: its generic
	// body assembles each word from eight.
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if notPlain(binary.LittleEndian.Uint64(s[i:])) != 0 {
			return false
		}
	}
	return plainLen(s[i:]) == len(s)-i
}

// plainLen returns how many bytes at the start of s are printable ASCII
// other than a quote or a backslash: the bytes a JSON string holds as
// they are (AppendString). It reads eight bytes at a time, as stringStop.
func plainLen[S ~string | ~[]byte](s S) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if m := notPlain(w); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if b := s[i]; b < ' ' || b > '~' || b == '"' || b == '\\' {
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
// notPlain marks, as stops does, the bytes of w that a JSON string does
// not hold as they are: stops, DEL and bytes beyond ASCII.
func notPlain(w uint64) uint64 {
	d := w ^ (ones * 0x7f) // DEL
	return stops(w) | w&highs | (d-ones)&^d&highs
}

func stops(w uint64) uint64 {
	q := w ^ (ones * '"')
	b := w ^ (ones * '\\')
	return ((q-ones)&^q | (b-ones)&^b | (w-ones*0x20)&^w) & highs
}
