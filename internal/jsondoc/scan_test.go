package jsondoc

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// randomBytes returns n random bytes: one in oneIn (on average) from
// alphabet, the bytes the scanner under test stops at and their
// neighbours, and the others from other.
func randomBytes(rng *rand.Rand, n int, alphabet []byte, oneIn int, other func() byte) []byte {
	b := make([]byte, n)
	for i := range b {
		if rng.IntN(oneIn) == 0 {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		} else {
			b[i] = other()
		}
	}
	return b
}

// TestStringStop: stringStop, with and without high, finds what a
// byte-at-a-time loop finds, from every start, in random bytes rich in the ones it stops at and in their
// neighbours (0x1f, 0x20, '!', '#', '[', ']', 0x7f, 0x80, 0xff).
func TestStringStop(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{'"', '\\', 0, 0x1f, 0x20, '!', '#', '[', ']', 'a', 0x7f, 0x80, 0xff, 0xa2, 0xdc}
	for range 20000 {
		s := randomBytes(rng, rng.IntN(40), alphabet, 4, func() byte { return byte(rng.UintN(256)) })
		for i := 0; i <= len(s); i++ {
			want := i
			for want < len(s) && s[want] != '"' && s[want] != '\\' && s[want] >= 0x20 {
				want++
			}
			if got := stringStop(s, i, false); got != want {
				t.Fatalf("stringStop(%q, %d, false) = %d, want %d", s, i, got, want)
			}
			high := i
			for high < len(s) && s[high] != '"' && s[high] != '\\' && s[high] >= 0x20 && s[high] < 0x80 {
				high++
			}
			if got := stringStop(s, i, true); got != high {
				t.Fatalf("stringStop(%q, %d, true) = %d, want %d", s, i, got, high)
			}
		}
	}
}

// TestPlainLen: plainLen finds what a byte-at-a-time loop finds, for
// bytes and strings, in random runs of plain bytes broken now and then by
// one that is not or by a neighbour of one (' ', '~', 0x7f, 0x80, ...).
func TestPlainLen(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := []byte{'"', '\\', 0, 0x1f, 0x20, '!', '#', '[', ']', '~', 0x7f, 0x80, 0xff, 0xa2, 0xdc, 0xfe}
	for range 20000 {
		s := randomBytes(rng, rng.IntN(40), alphabet, 12, func() byte { return byte(' ' + rng.IntN('~'-' '+1)) })
		want := 0
		for want < len(s) && ' ' <= s[want] && s[want] <= '~' && s[want] != '"' && s[want] != '\\' {
			want++
		}
		if got := plainLen(s); got != want {
			t.Fatalf("plainLen(%q) = %d, want %d", s, got, want)
		}
		if got := plainLen(string(s)); got != want {
			t.Fatalf("plainLen(string %q) = %d, want %d", s, got, want)
		}
	}
}

// TestStringEnd: stringEnd finds what a byte-at-a-time reading finds,
// with the string's end before, at and after its first word, escapes
// (an escaped quote among them) in and past it, and control and high
// bytes, which stop the word-at-a-time search without ending the string.
func TestStringEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	alphabet := []byte{'"', '\\', 0x01, 0x1f, 0x80, 0xff, 'a', 'z', '~', ' '}
	for range 50000 {
		b := randomBytes(rng, rng.IntN(30), alphabet, 6, func() byte { return byte('a' + rng.IntN(26)) })
		i := 0
		if len(b) > 0 {
			i = rng.IntN(len(b))
			b[i] = '"'
		} else {
			b = []byte{'"'}
		}
		want := len(b)
		for j := i + 1; j < len(b); j++ {
			if b[j] == '\\' {
				j++
				continue
			}
			if b[j] == '"' {
				want = j + 1
				break
			}
		}
		if got := stringEnd(b, i); got != want {
			t.Fatalf("stringEnd(%q, %d) = %d, want %d", b, i, got, want)
		}
	}
}

// TestKeyEnd: keyEnd is stringEnd and plainASCII, on the strings of
// TestStringEnd's kind.
func TestKeyEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	alphabet := []byte{'"', '\\', 0x01, 0x80, 0xc3, 0xa9, 0xff, 'a', '~'}
	for range 50000 {
		b := randomBytes(rng, 1+rng.IntN(30), alphabet, 5, func() byte { return byte('a' + rng.IntN(26)) })
		i := rng.IntN(len(b))
		b[i] = '"'
		end := stringEnd(b, i)
		wantPlain := plainASCII(b[i+1 : max(end-1, i+1)])
		if gotEnd, gotPlain := keyEnd(b, i); gotEnd != end || gotPlain != wantPlain {
			t.Fatalf("keyEnd(%q, %d) = %d, %v; want %d, %v", b, i, gotEnd, gotPlain, end, wantPlain)
		}
	}
}

// TestPlain: Plain is plainLen covering all of s, for runs of every
// length around a word's, broken at every place by a byte that is not
// plain or by a neighbour of one.
func TestPlain(t *testing.T) {
	for n := range 40 {
		s := bytes.Repeat([]byte{'a'}, n)
		if !Plain(s) {
			t.Fatalf("Plain(%q) = false", s)
		}
		for i := range n {
			for _, c := range []byte{'"', '\\', 0, 0x1f, 0x20, '~', 0x7f, 0x80, 0xff} {
				s[i] = c
				if got, want := Plain(s), plainLen(s) == len(s); got != want {
					t.Fatalf("Plain(%q) = %v, want %v", s, got, want)
				}
			}
			s[i] = 'a'
		}
	}
}
