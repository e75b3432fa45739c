package jsondoc

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/itchyny/gojq"
)

// TestAppendString compares AppendString with gojq.Marshal on random
// strings of ASCII, control bytes, DEL, runes beyond ASCII and invalid
// UTF-8, as strings and as bytes.
func TestAppendString(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	pieces := []string{"a", "Z", " ", "~", "\x7f", "\"", "\\", "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "é", "\u2028", "😀", "\xff", "\xe2\x80", "<>&"}
	for range 20000 {
		var s string
		for range rng.IntN(8) {
			s += pieces[rng.IntN(len(pieces))]
			if rng.IntN(4) == 0 { // a run of plain bytes, which is read eight at a time
				s += strings.Repeat("a", rng.IntN(20))
			}
		}
		want, err := gojq.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("AppendString(%q) = %s, gojq.Marshal gives %s", s, got[1:], want)
		}
		if got := AppendString(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Fatalf("AppendString([]byte(%q)) = %s, gojq.Marshal gives %s", s, got, want)
		}
	}
}
