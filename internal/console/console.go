// Package console is what nodewatch knows of the terminal and the pipes
// around it: whether a writer is a terminal and how wide, when the reader
// of a pipe went away, and how to read a password without echo. It is the
// one place that speaks termios and poll(2), so that the commands only ask.
//
// What only Linux gives (poll(2) on a pipe's write end, F_SETPIPE_SZ,
// /proc/self/fd, TCGETS) sits in the *_linux.go files; elsewhere the
// *_other.go files give the plain behaviour: a reader that went away is
// noticed at the next write, stdout is written as it is, and the password
// prompt is x/term's.
package console

import (
	"io"
	"os"

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
	width, _ := Size(w)
	return width
}

// Size returns the width and height of the terminal w is, or 0, 0 when w
// is not a terminal.
func Size(w io.Writer) (width, height int) {
	f, ok := w.(*os.File)
	if !ok {
		return 0, 0
	}
	width, height, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0, 0
	}
	return width, height
}

// Arrange arranges a run's output for a terminal: when stderr is one, a
// progress meter shows there how a long listing advances, and every other
// write to it (log lines, and stdout when it is the same terminal) erases
// the meter's line first. It returns the writers to use instead of stdout
// and stderr, and the meter (nil when stderr is not a terminal, or a dumb
// one, which cannot erase a line).
func Arrange(stdout, stderr io.Writer, dumb bool) (out, errw io.Writer, meter *progress.Meter) {
	if dumb || !IsTerminal(stderr) {
		return stdout, stderr, nil
	}
	meter = progress.New(stderr, 0)
	out = stdout
	if IsTerminal(stdout) {
		out = meter.Writer(stdout)
	}
	return out, meter.Writer(stderr), meter
}
