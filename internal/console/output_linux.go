package console

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/nodewatch/nodewatch/internal/fast"
	"github.com/nodewatch/nodewatch/internal/quietio"
)

// Output returns the writer a run prints to instead of w, and a func that
// lets go of it once the run has stopped writing. When w is a pipe (the
// usual `nodewatch … | jq`), the writer writes to the pipe through an
// open file of its own, non-blocking, with raw write(2) calls, so that a
// line printed after a quiet spell does not wake the Go runtime's
// monitor thread (package quietio says why that costs). Opening the pipe
// again makes a new open file: O_NONBLOCK on it is nodewatch's alone,
// and whoever else shares stdout (the shell, a subshell writing after
// nodewatch) keeps a blocking pipe. Anything else, or a pipe that cannot
// be opened again (no /proc), is returned as it is; so is every writer
// with the Pipe fast path off. With RawIO off, the pipe is reopened and
// grown, but written as an os.File.
func Output(w io.Writer) (io.Writer, func()) {
	f, ok := w.(*os.File)
	if !ok || !fast.On(fast.Pipe) {
		return w, func() {}
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return w, func() {}
	}
	fd, flags := -1, 0
	var ferr error
	rc, err := f.SyscallConn()
	if err != nil {
		return w, func() {}
	}
	err = rc.Control(func(sysfd uintptr) {
		fd = int(sysfd)
		flags, ferr = unix.FcntlInt(sysfd, unix.F_GETFL, 0)
	})
	if err != nil || ferr != nil || flags&unix.O_ACCMODE == unix.O_RDONLY {
		// A read end given as stdout: writing to it must fail as it
		// always did, not reach the pipe's other end.
		return w, func() {}
	}
	own, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return w, func() {}
	}
	growPipe(own)
	// A non-blocking descriptor is registered with the runtime's poller,
	// which the writer waits in when the pipe is full.
	pf := os.NewFile(uintptr(own), f.Name())
	if !quietio.Supported || !fast.On(fast.RawIO) {
		return pf, func() { pf.Close() } // written as any Go program writes a file
	}
	prc, err := pf.SyscallConn()
	if err != nil {
		pf.Close()
		return w, func() {}
	}
	return &pipeWriter{f: pf, w: quietio.NewWriter(prc)}, func() { pf.Close() }
}

// PipeSize is the room Output asks of a pipe that has less: 256 KiB,
// against Linux's default of 64 KiB. A reader that falls behind for a
// moment (jq on a loaded machine, a script's loop) then costs nodewatch no
// write that would block, and no wait in the poller and wake-up after it:
// following transactions of 50 records of 200 B with a --filter, where
// the reader is the compare tool of make bench-compare on a busy 2-core
// machine, a fifth of the writes into 64 KiB found the pipe full, and
// 256 KiB took nodewatch's CPU per change down by about 7%. A
// reader that stays behind has up to 256 KiB of lines unread in the pipe,
// not 64, before nodewatch's writes wait; what nodewatch has not written
// yet waits in the hand-off and is merged, as before.
const PipeSize = 256 << 10

// growPipe makes the pipe fd writes to hold PipeSize bytes, if it holds
// less. The pipe is the reader's too; it is never made smaller. The
// kernel may refuse (past the user's quota of pipe pages, or
// /proc/sys/fs/pipe-max-size): the pipe stays as it was.
func growPipe(fd int) {
	if n, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0); err == nil && n < PipeSize {
		unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, PipeSize)
	}
}

// pipeWriter writes to a pipe opened by Output, with errors as
// os.File.Write gives them: "write /dev/stdout: broken pipe".
type pipeWriter struct {
	f *os.File
	w *quietio.Writer
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if err != nil {
		err = &os.PathError{Op: "write", Path: p.f.Name(), Err: err}
	}
	return n, err
}
