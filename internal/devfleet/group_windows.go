package devfleet

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own: a Ctrl-C at the
// console reaches serve, not etcd under it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}
