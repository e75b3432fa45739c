package testkit

import (
	"os"
	"syscall"
	"testing"
)

// Pipe returns a pipe as a shell gives one: both ends blocking, so that
// os.NewFile leaves them out of the runtime's poller (os.Pipe makes its
// ends non-blocking and polled). nonblockingWrite makes the write end
// non-blocking before it is opened, so that it is polled, as a raw writer
// needs (quietio.Writer). The write end is named /dev/stdout, as a
// command's stdout is in the errors of writes to it. Both ends are closed
// when the test ends.
func Pipe(t testing.TB, nonblockingWrite bool) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if nonblockingWrite {
		if err := syscall.SetNonblock(fds[1], true); err != nil {
			t.Fatal(err)
		}
	}
	r, w = os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "/dev/stdout")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}
