package handler

import (
	"os"
	"os/exec"
	"syscall"
)

// shell returns the command that runs command in cmd.exe (%ComSpec%), with
// the command line given as it is: cmd.exe does not parse its arguments
// as other programs do, so Go's quoting of them would change the command.
// cmd.exe has no positional parameters: args are not passed.
func shell(command string, _ []string) *exec.Cmd {
	comspec := os.Getenv("ComSpec")
	if comspec == "" {
		comspec = `C:\Windows\System32\cmd.exe`
	}
	cmd := exec.Command(comspec)
	// The whole line, argv[0] first, as CreateProcess expects it.
	cmd.SysProcAttr = &syscall.SysProcAttr{CmdLine: `"` + comspec + `" /d /s /c "` + command + `"`}
	return cmd
}

// ownGroup starts cmd in a process group of its own, so that a Ctrl-C at
// the console reaches nodewatch, which then ends the handler itself.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr.CreationFlags |= syscall.CREATE_NEW_PROCESS_GROUP
}

// signalGroup ends p: Windows has no signals to pass on, so any of them
// (SIGTERM after a timeout, the signal nodewatch got) ends the handler at
// once, and what it started is left to it.
func signalGroup(p *os.Process, _ syscall.Signal) { p.Kill() }
