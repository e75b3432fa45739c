package dial

import (
	"math/rand/v2"
	"testing"
)

// TestDirtyPool: whatever was put back (its own buffers, buffers of other
// capacities, prefixes of them), a Get of n bytes has length n and room
// for them, in a buffer of a tier's size up to 1 MiB, and no buffer is
// handed out twice before it is put back.
func TestDirtyPool(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	p := &dirtyPool{}
	size := func() int {
		switch rng.IntN(4) {
		case 0:
			return rng.IntN(300)
		case 1:
			return 1 << rng.IntN(22) // a tier's size, and just past it below
		default:
			return rng.IntN(2 << 20)
		}
	}
	out := map[*byte]bool{} // the first byte of each buffer handed out
	var held []*[]byte
	for range 20000 {
		if len(held) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(held))
			b := held[i]
			held = append(held[:i], held[i+1:]...)
			if cap(*b) > 0 {
				delete(out, &(*b)[:1][0])
			}
			*b = (*b)[:rng.IntN(len(*b)+1)] // a prefix, as gRPC may put back
			p.Put(b)
			continue
		}
		if rng.IntN(8) == 0 { // a buffer from elsewhere, any capacity
			b := make([]byte, 0, size())
			p.Put(&b)
		}
		n := size()
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n {
			t.Fatalf("Get(%d): len %d, cap %d", n, len(*b), cap(*b))
		}
		if c := cap(*b); n > 0 && n <= 1<<maxTier && (c&(c-1) != 0 || c < 1<<minTier) {
			t.Fatalf("Get(%d): cap %d is no tier's", n, c)
		}
		if cap(*b) > 0 {
			first := &(*b)[:1][0]
			if out[first] {
				t.Fatalf("Get(%d): a buffer handed out twice", n)
			}
			out[first] = true
		}
		held = append(held, b)
	}
}
