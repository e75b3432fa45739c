// Package console is what nodewatch knows of the terminal and the pipes
// around it: whether a writer is a terminal and how wide, when the reader
// of a pipe went away, and how to read a password without echo. It is the
// one place that speaks termios and poll(2), so that the commands only ask.
package console

import (
	"context"
	"io"
	"os"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/nodewatch/nodewatch/internal/progress"
)

// IsTerminal reports whether w is a terminal.
func IsTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Width returns the width of the terminal w is, or 0 when w is not a
// terminal.
func Width(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

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

// Arrange arranges a run's output for a terminal: when stderr is one, a
// progress meter shows there how a long listing advances, and every other
// write to it (log lines, and stdout when it is the same terminal) erases
// the meter's line first. It returns the writers to use instead of stdout
// and stderr, and the meter (nil when stderr is not a terminal).
func Arrange(stdout, stderr io.Writer) (out, errw io.Writer, meter *progress.Meter) {
	if !IsTerminal(stderr) {
		return stdout, stderr, nil
	}
	meter = progress.New(stderr, 0)
	out = stdout
	if IsTerminal(stdout) {
		out = meter.Writer(stdout)
	}
	return out, meter.Writer(stderr), meter
}
