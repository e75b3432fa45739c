package console

import (
	"context"
	"strings"

	"golang.org/x/sys/unix"
)

// readPassword turns the echo off with termios (ReadPassword restores
// it), prompts, and waits in poll(2) for a line, giving up when ctx ends.
func readPassword(ctx context.Context, fd int, prompt func()) (string, error) {
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", err
	}
	tio.Lflag &^= unix.ECHO
	tio.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, tio); err != nil {
		return "", err
	}
	prompt() // only now: what is typed from here on is not shown
	// In canonical mode the terminal hands over whole lines: once fd is
	// readable, a line (or end of input) is there.
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 100)
		if err != nil && err != unix.EINTR {
			return "", err
		}
		if n > 0 {
			break
		}
	}
	var line []byte
	buf := make([]byte, 256)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", err
		}
		line = append(line, buf[:n]...)
		if n == 0 || line[len(line)-1] == '\n' {
			return strings.TrimRight(string(line), "\r\n"), nil
		}
	}
}
