package server

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"golang.org/x/net/http2"
)

// TestResetWatchModel: frames of random types and lengths, RST_STREAM
// among them with random codes, written in random pieces: resetWatch
// finds each RST_STREAM with FRAME_SIZE_ERROR, and nothing else.
func TestResetWatchModel(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var stream []byte
		want := 0
		for range rng.IntN(40) {
			typ := http2.FrameType(rng.IntN(10))
			payload := make([]byte, rng.IntN(60))
			if typ == http2.FrameRSTStream {
				payload = make([]byte, 4)
				code := http2.ErrCode(rng.IntN(14))
				binary.BigEndian.PutUint32(payload, uint32(code))
				if code == http2.ErrCodeFrameSize {
					want++
				}
			} else {
				for i := range payload {
					payload[i] = byte(rng.IntN(256)) // a RST_STREAM's header may hide in it
				}
			}
			stream = append(stream, byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload)), byte(typ), 0, 0, 0, 0, byte(1+rng.IntN(9)))
			stream = append(stream, payload...)
		}
		got := 0
		c := &resetWatch{Conn: &net.TCPConn{}, refused: func(net.Addr) { got++ }}
		for p := stream; len(p) > 0; {
			k := min(len(p), 1+rng.IntN(20))
			c.scan(p[:k])
			p = p[k:]
		}
		if got != want {
			t.Fatalf("seed %d: %d resets found, want %d", seed, got, want)
		}
	}
}

// BenchmarkResetWatch is what watching for resets costs a write of 32
// KiB of DATA frames of 300 bytes (Watch events, as serve sends them),
// beside the write it watches: a few branches a frame.
func BenchmarkResetWatch(b *testing.B) {
	var p []byte
	for len(p) < 32<<10 {
		p = append(p, 0, 1, 44, byte(http2.FrameData), 0, 0, 0, 0, 1)
		p = append(p, make([]byte, 300)...)
	}
	c := &resetWatch{Conn: &net.TCPConn{}, refused: func(net.Addr) {}}
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		c.scan(p)
	}
}
