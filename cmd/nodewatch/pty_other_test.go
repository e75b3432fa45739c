//go:build unix && !linux

package main

import (
	"os"
	"os/exec"
	"testing"
)

// openPTY skips: the tests open pseudo-terminals the Linux way only.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Skip("pseudo-terminals are opened on Linux only")
	return nil, nil
}

// onTerminal skips, as openPTY does.
func onTerminal(t *testing.T, cmd *exec.Cmd) string {
	openPTY(t)
	return ""
}
