package jsondoc

import (
	"math/rand/v2"
	"testing"
)

// TestStringStop: stringStop finds what a byte-at-a-time loop finds, from
// every start, in random bytes rich in the ones it stops at and in their
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
			if got := stringStop(s, i); got != want {
				t.Fatalf("stringStop(%q, %d) = %d, want %d", s, i, got, want)
			}
		}
	}
}
