//go:build linux && race

package quietio

import "syscall"

// Under the race detector, read(2) and write(2) go through package
// syscall, whose calls tell the detector what they read and wrote and
// that a write happens before the read of its bytes: raw calls would
// hide both (a byte sent after a store and read before a load would be
// reported as a race). A race build is for tests, not for speed.
func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), b)
	return max(n, 0), errno(err)
}

func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	return max(n, 0), errno(err)
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}
