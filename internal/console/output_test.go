//go:build linux

package console

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodewatch/nodewatch/internal/quietio"
	"github.com/nodewatch/nodewatch/internal/testkit"
)

// skipWithoutReopen skips where Output cannot reopen a pipe at all.
func skipWithoutReopen(t *testing.T) {
	t.Helper()
	if !quietio.Supported {
		t.Skip("no raw calls on this system")
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd")
	}
}

// nonblocking reports whether f's open file has O_NONBLOCK, without
// changing it (f.Fd would).
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if ferr != nil {
		t.Fatal(ferr)
	}
	return flags&unix.O_NONBLOCK != 0
}

// TestOutputPipe: to a pipe, Output writes through a non-blocking open
// file of its own, and the pipe carries what was written, in order, even
// when the reader falls behind by more than the pipe holds; stdout's own
// open file, which the shell shares, stays blocking.
func TestOutputPipe(t *testing.T) {
	skipWithoutReopen(t)
	r, w := testkit.Pipe(t, false)
	out, release := Output(w)
	if _, ok := out.(*pipeWriter); !ok {
		t.Fatalf("Output of a pipe is %T, want its own writer", out)
	}
	got := make(chan []byte)
	go func() {
		// A slow reader, so that long lines are written in parts.
		var b bytes.Buffer
		p := make([]byte, 5000)
		for {
			n, err := r.Read(p)
			b.Write(p[:n])
			if err != nil {
				got <- b.Bytes()
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	var want bytes.Buffer
	for i := range 300 {
		size := rng.IntN(3000)
		if i%20 == 0 {
			size = PipeSize + rng.IntN(PipeSize) // more than the pipe holds
		}
		line := bytes.Repeat([]byte{'a' + byte(i%26)}, size)
		line = append(line, '\n')
		if n, err := out.Write(line); n != len(line) || err != nil {
			t.Fatalf("line %d: wrote %d of %d: %v", i, n, len(line), err)
		}
		want.Write(line)
	}
	if nonblocking(t, w) {
		t.Fatal("stdout's open file was made non-blocking: the shell shares it")
	}
	release()
	w.Close()
	if g := <-got; !bytes.Equal(g, want.Bytes()) {
		t.Fatalf("the pipe carried %d bytes, not the %d written", len(g), want.Len())
	}
}

// TestOutputGrowsPipe: Output makes a pipe of Linux's default size hold
// PipeSize bytes, and leaves one that holds more as it is (the reader may
// have made it so).
func TestOutputGrowsPipe(t *testing.T) {
	skipWithoutReopen(t)
	size := func(f *os.File) int {
		t.Helper()
		n, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Where the kernel refuses this user a pipe of PipeSize
	// (pipe-max-size, the quota of pipe pages), Output cannot have one.
	_, probe := testkit.Pipe(t, false)
	if _, err := unix.FcntlInt(probe.Fd(), unix.F_SETPIPE_SZ, PipeSize); err != nil {
		t.Skipf("a pipe of %d bytes: %v", PipeSize, err)
	}
	_, w := testkit.Pipe(t, false)
	if n := size(w); n >= PipeSize {
		t.Skipf("a new pipe holds %d bytes already", n)
	}
	_, release := Output(w)
	release()
	if n := size(w); n != PipeSize {
		t.Fatalf("after Output, the pipe holds %d bytes, want %d", n, PipeSize)
	}
	_, big := testkit.Pipe(t, false)
	const larger = 4 * PipeSize
	if _, err := unix.FcntlInt(big.Fd(), unix.F_SETPIPE_SZ, larger); err != nil {
		t.Skipf("a pipe of %d bytes: %v", larger, err)
	}
	_, release = Output(big)
	release()
	if n := size(big); n != larger {
		t.Fatalf("Output made a pipe of %d bytes hold %d", larger, n)
	}
}

// TestOutputBrokenPipe: when the reader went away, a write fails as
// os.File's does, in the same words.
func TestOutputBrokenPipe(t *testing.T) {
	skipWithoutReopen(t)
	r, w := testkit.Pipe(t, false)
	out, release := Output(w)
	defer release()
	r.Close()
	_, err := out.Write([]byte("x\n"))
	_, plain := w.Write([]byte("x\n")) // not fd 1: no SIGPIPE
	if !errors.Is(err, syscall.EPIPE) || plain == nil || err.Error() != plain.Error() {
		t.Fatalf("write without a reader: %v, os.File says %v", err, plain)
	}
}

// TestOutputOthers: what is not a pipe is written to as it is.
func TestOutputOthers(t *testing.T) {
	var buf bytes.Buffer
	if out, _ := Output(&buf); out != &buf {
		t.Fatal("a buffer was wrapped")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if out, _ := Output(f); out != f {
		t.Fatal("a regular file was wrapped")
	}
}

// TestOutputReadEnd: a pipe's read end given as stdout is left as it is,
// so that writing fails as it always did instead of reaching the pipe's
// other end.
func TestOutputReadEnd(t *testing.T) {
	skipWithoutReopen(t)
	r, _ := testkit.Pipe(t, false)
	if out, _ := Output(r); out != r {
		t.Fatalf("a read end became %T", out)
	}
}

// TestOutputReleaseEndsWrite: release ends a write that waits for a
// reader that does not read, as closing stdout would.
func TestOutputReleaseEndsWrite(t *testing.T) {
	skipWithoutReopen(t)
	_, w := testkit.Pipe(t, false)
	out, release := Output(w)
	done := make(chan error)
	go func() {
		_, err := out.Write(make([]byte, 4*PipeSize)) // more than the pipe holds
		done <- err
	}()
	// Whether or not the write has begun to wait, release ends it.
	release()
	if err := <-done; err == nil {
		t.Fatal("a write to a full pipe succeeded after release")
	}
}
