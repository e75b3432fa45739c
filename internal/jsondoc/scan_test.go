package jsondoc

import (
	"math/rand/v2"
	"testing"
)

// TestStringStop: stringStop, with and without high, finds what a
// byte-at-a-time loop finds, from every start, in random bytes rich in the ones it stops at and in their
// neighbours (0x1f, 0x20, '!', '#', '[', ']', 0x7f, 0x80, 0xff).
func TestStringStop(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{'"', '\\', 0, 0x1f, 0x20, '!', '#', '[', ']', 'a', 0x7f, 0x80, 0xff, 0xa2, 0xdc}
	for range 20000 {
		s := make([]byte, rng.IntN(40))
		for i := range s {
			if rng.IntN(4) == 0 {
				s[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				s[i] = byte(rng.UintN(256))
			}
		}
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
		s := make([]byte, rng.IntN(40))
		for i := range s {
			if rng.IntN(12) == 0 {
				s[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				s[i] = byte(' ' + rng.IntN('~'-' '+1))
			}
		}
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
