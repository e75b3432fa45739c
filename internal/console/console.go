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
// returns true then, or false when ctx ends first. Writers that are not
// pipes or sockets are never reported.
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
	fd := int32(f.Fd())
	for ctx.Err() == nil {
		// POLLERR (pipe) or POLLHUP (socket) without asking for any event:
		// the kernel reports these whatever the mask.
		fds := []unix.PollFd{{Fd: fd}}
		n, err := unix.Poll(fds, 200)
		if err != nil && err != unix.EINTR {
			<-ctx.Done()
			return false
		}
		if n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			return true
		}
	}
	return false
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
