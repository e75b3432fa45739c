package console

import (
	"context"
	"strings"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// ReadPassword turns the echo of the terminal fd off, prompts, and reads
// a line; it restores the terminal as it was. It
// returns ctx.Err() when ctx ends first (Ctrl-C, with the signal context),
// with the terminal as it was: term.ReadPassword would block until a line
// came, with the echo off.
func ReadPassword(ctx context.Context, fd int, prompt func()) (string, error) {
	saved, err := term.GetState(fd)
	if err != nil {
		return "", err
	}
	defer term.Restore(fd, saved)
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
