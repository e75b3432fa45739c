package dial

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// recvPool is the buffer pool of nodewatch's gRPC clients: the buffers
// that frames and messages are read into. grpc-go's default pool clears
// the whole of every buffer it hands out, although a reader fills the
// length it asked for before anything reads it; and it hands out the
// next power of two, up to 1 MiB: a transaction of 50 records of 4 KiB
// (a message of 200 KiB) cleared 1 MiB, 3% of nodewatch's CPU profile
// while it followed such transactions. recvPool hands buffers out as
// they were put back.
var recvPool mem.BufferPool = &dirtyPool{}

// dirtyPool is a mem.BufferPool of buffers whose capacities are powers of
// two from 2^minTier to 2^maxTier bytes, one sync.Pool each; a larger
// buffer is made for each Get and left to the GC. Get's buffer has the
// length asked for and bytes from its last use.
type dirtyPool struct {
	tiers [maxTier - minTier + 1]sync.Pool
}

const (
	minTier = 8  // 256 B
	maxTier = 20 // 1 MiB
)

// tier returns the tier of the smallest buffer that holds n bytes, and
// false if n needs more than the largest.
func tier(n int) (int, bool) {
	t := max(bits.Len(uint(max(n, 1)-1)), minTier) // 2^t >= n
	return t - minTier, t <= maxTier
}

func (p *dirtyPool) Get(n int) *[]byte {
	t, ok := tier(n)
	if !ok {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(t+minTier))
	return &b
}

// Put keeps b for a later Get if its capacity is one of the tiers' (a
// buffer of Get's, or of grpc-go's default pool, whose sizes include
// them); any other is left to the GC.
func (p *dirtyPool) Put(b *[]byte) {
	c := cap(*b)
	if c == 0 || c&(c-1) != 0 {
		return
	}
	if t, ok := tier(c); ok && c >= 1<<minTier {
		p.tiers[t].Put(b)
	}
}
