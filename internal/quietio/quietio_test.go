//go:build linux

package quietio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodewatch/nodewatch/internal/testkit"
)

func skipUnsupported(t *testing.T) {
	t.Helper()
	if !Supported {
		t.Skip("no raw calls on this system")
	}
}

// rawConn returns c's RawConn, for NewReader and NewWriter.
func rawConn(t *testing.T, c syscall.Conn) syscall.RawConn {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// chunks returns n random chunks of up to max bytes, each filled with
// its own index so that a torn or reordered chunk shows.
func chunks(rng *rand.Rand, n, max int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		c := make([]byte, 1+rng.IntN(max))
		for j := range c {
			c[j] = byte(i*7 + j%13)
		}
		out[i] = c
	}
	return out
}

// TestWriterModel writes random chunks, many larger than the pipe holds,
// to a pipe drained by a reader that reads in random small pieces and
// pauses: every Write must write all of its chunk (waiting for room as
// often as it takes), and the pipe must carry exactly the chunks'
// concatenation.
func TestWriterModel(t *testing.T) {
	skipUnsupported(t)
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 1))
		r, w := testkit.Pipe(t, true)
		qw := NewWriter(rawConn(t, w))
		cs := chunks(rng, 40, 200_000) // a pipe holds 64 KiB
		var want bytes.Buffer
		for _, c := range cs {
			want.Write(c)
		}
		got := make(chan []byte)
		go func() {
			rr := rand.New(rand.NewPCG(seed, 2))
			var buf bytes.Buffer
			p := make([]byte, 70_000)
			for {
				n, err := r.Read(p[:1+rr.IntN(len(p))])
				buf.Write(p[:n])
				if err != nil {
					got <- buf.Bytes()
					return
				}
				if rr.IntN(8) == 0 {
					time.Sleep(time.Duration(rr.IntN(300)) * time.Microsecond)
				}
			}
		}()
		for i, c := range cs {
			n, err := qw.Write(c)
			if n != len(c) || err != nil {
				t.Fatalf("seed %d: chunk %d: wrote %d of %d: %v", seed, i, n, len(c), err)
			}
		}
		w.Close()
		if g := <-got; !bytes.Equal(g, want.Bytes()) {
			t.Fatalf("seed %d: the pipe carried %d bytes, not the %d written in order", seed, len(g), want.Len())
		}
	}
}

// TestWriterWholeChunks: Writes from several goroutines each land whole,
// however often they wait for room.
func TestWriterWholeChunks(t *testing.T) {
	skipUnsupported(t)
	r, w := testkit.Pipe(t, true)
	qw := NewWriter(rawConn(t, w))
	rng := rand.New(rand.NewPCG(3, 4))
	cs := chunks(rng, 60, 100_000)
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(cs); i += 4 {
				if n, err := qw.Write(cs[i]); n != len(cs[i]) || err != nil {
					t.Errorf("chunk %d: wrote %d of %d: %v", i, n, len(cs[i]), err)
				}
			}
		})
	}
	wg.Wait()
	w.Close()
	out := <-got
	seen := make([]bool, len(cs))
	for len(out) > 0 {
		i := -1
		for j, c := range cs {
			if !seen[j] && bytes.HasPrefix(out, c) {
				i = j
				break
			}
		}
		if i < 0 {
			t.Fatalf("%d bytes left that begin no chunk: a chunk was torn", len(out))
		}
		seen[i] = true
		out = out[len(cs[i]):]
	}
	for i, s := range seen {
		if !s {
			t.Fatalf("chunk %d missing", i)
		}
	}
}

// TestWriterBrokenPipe: a pipe without a reader gives EPIPE, as write(2)
// does.
func TestWriterBrokenPipe(t *testing.T) {
	skipUnsupported(t)
	r, w := testkit.Pipe(t, true)
	qw := NewWriter(rawConn(t, w))
	r.Close()
	_, err := qw.Write([]byte("x\n"))
	if !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a pipe without a reader: %v, want EPIPE", err)
	}
}

// TestReaderModel sends random chunks, with pauses, and reads them with
// random buffer sizes: the reads must give exactly what was sent, then
// io.EOF.
func TestReaderModel(t *testing.T) {
	skipUnsupported(t)
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 5))
		c, s := testkit.TCPPair(t)
		qr := NewReader(rawConn(t, c))
		cs := chunks(rng, 60, 50_000)
		var want bytes.Buffer
		for _, ch := range cs {
			want.Write(ch)
		}
		go func() {
			wr := rand.New(rand.NewPCG(seed, 6))
			for _, ch := range cs {
				if _, err := s.Write(ch); err != nil {
					return
				}
				if wr.IntN(4) == 0 {
					time.Sleep(time.Duration(wr.IntN(500)) * time.Microsecond)
				}
			}
			s.CloseWrite()
		}()
		var got bytes.Buffer
		p := make([]byte, 40_000)
		for {
			n, err := qr.Read(p[:1+rng.IntN(len(p))])
			if n == 0 && err == nil {
				t.Fatalf("seed %d: Read returned 0 bytes and no error", seed)
			}
			got.Write(p[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("seed %d: read %d bytes, not the %d sent in order", seed, got.Len(), want.Len())
		}
	}
}

// TestReaderDeadlineAndClose: a read waits in the poller, so a deadline
// and a Close end it as they end net.Conn's.
func TestReaderDeadlineAndClose(t *testing.T) {
	skipUnsupported(t)
	c, _ := testkit.TCPPair(t)
	qr := NewReader(rawConn(t, c))
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := qr.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a deadline error", err)
	}
	c.SetReadDeadline(time.Time{})
	done := make(chan error)
	go func() {
		_, err := qr.Read(make([]byte, 10))
		done <- err
	}()
	// The read is waiting once the goroutine is blocked; closing ends it
	// whether or not it has begun to wait.
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read of a closed connection: %v, want net.ErrClosed", err)
	}
}

// TestRaceDetectorSees: under the race detector (make test), a store made
// before a write is seen by whoever reads that write's bytes, as through
// net.Conn. Raw calls hide the write and the read from the detector,
// which then reports a race here (tried).
func TestRaceDetectorSees(t *testing.T) {
	skipUnsupported(t)
	c, s := testkit.TCPPair(t)
	qr := NewReader(rawConn(t, c))
	shared := 0
	go func() {
		shared = 42
		rc, err := s.SyscallConn()
		if err != nil {
			return
		}
		NewWriter(rc).Write([]byte{1})
	}()
	b := make([]byte, 1)
	if _, err := qr.Read(b); err != nil {
		t.Fatal(err)
	}
	if shared != 42 {
		t.Fatalf("shared = %d after the read", shared)
	}
}
