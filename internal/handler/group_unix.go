//go:build unix

package handler

import (
	"os"
	"os/exec"
	"syscall"
)

// shell returns the command that runs command in /bin/sh.
func shell(command string) *exec.Cmd { return exec.Command("/bin/sh", "-c", command) }

// ownGroup makes cmd the leader of a process group of its own, so that a
// signal reaches everything it starts.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to the process group that p leads.
func signalGroup(p *os.Process, sig syscall.Signal) { syscall.Kill(-p.Pid, sig) }
