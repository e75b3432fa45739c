package console

import (
	"context"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// WaitHangup blocks until the reader of w goes away (`| head -1`
// exited), even if nothing is being written: a quiet watch would
// otherwise only notice at its next write, which may never come. It
// returns true then, or false as soon as ctx ends. Writers that are not
// pipes or sockets are never reported.
//
// It waits in one poll(2) with no timeout, on w and on a pipe of its own
// that the end of ctx closes: a run that ends does not wait for a poll to
// time out (a command in a pipeline would otherwise take that long longer
// than its work), and a quiet one is not woken to ask again.
func WaitHangup(ctx context.Context, w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		<-ctx.Done()
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		<-ctx.Done()
		return false
	}
	var wake [2]int
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC); err != nil {
		<-ctx.Done()
		return false
	}
	defer unix.Close(wake[0])
	// Whoever runs last of the two closes the write end: the end of ctx
	// (which wakes the poll), or this function once ctx can no longer end
	// it.
	closeWake := func() { unix.Close(wake[1]) }
	stop := context.AfterFunc(ctx, closeWake)
	defer func() {
		if stop() {
			closeWake()
		}
	}()
	// POLLERR (pipe) or POLLHUP (socket) without asking for any event:
	// the kernel reports these whatever the mask. The wake pipe's read end
	// becomes readable (POLLHUP) when its write end is closed.
	fds := []unix.PollFd{{Fd: int32(f.Fd())}, {Fd: int32(wake[0]), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil, fds[0].Revents&unix.POLLNVAL != 0:
			<-ctx.Done()
			return false
		case fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0:
			return true
		case fds[1].Revents != 0:
			return false
		}
	}
}
