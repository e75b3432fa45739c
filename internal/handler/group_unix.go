//go:build unix

package handler

import (
	"os"
	"os/exec"
	"syscall"
)

// shell returns the command that runs command in /bin/sh, with args as
// its positional parameters ($0 is "sh" then).
func shell(command string, args []string) *exec.Cmd {
	if len(args) == 0 {
		return exec.Command("/bin/sh", "-c", command)
	}
	return exec.Command("/bin/sh", append([]string{"-c", command, "sh"}, args...)...)
}

// ownGroup makes cmd the leader of a process group of its own, so that a
// signal reaches everything it starts.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to the process group that p leads.
func signalGroup(p *os.Process, sig syscall.Signal) { syscall.Kill(-p.Pid, sig) }
