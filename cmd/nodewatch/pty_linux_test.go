//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a new pseudo-terminal and returns its two ends (the
// test's, and the one to give a command); the test skips where there
// are none.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		ptm.Close()
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		ptm.Close()
		t.Fatal(err)
	}
	pts, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		t.Fatal(err)
	}
	return ptm, pts
}

// onTerminal runs cmd with stdout (and stderr, unless cmd has one) on a
// new pseudo-terminal, 100 columns wide, and returns what it printed.
func onTerminal(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	ptm, pts := openPTY(t)
	defer ptm.Close()
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 100}); err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pts
	if cmd.Stderr == nil {
		cmd.Stderr = pts
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	var out strings.Builder
	io.Copy(&out, ptm) // until EIO, once the last writer is gone
	cmd.Wait()
	return out.String()
}
