package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// etcdUser splits --user NAME[:PASSWORD]. Without a password it comes
// from NODEWATCH_PASSWORD, or else is asked for on the terminal stdin is
// (without echo). No error names the password.
func etcdUser(ctx context.Context, e *env, user string) (name, password string, err error) {
	name, password, _ = strings.Cut(user, ":")
	if name == "" {
		return "", "", usagef("--user: no user name before the colon (want NAME[:PASSWORD])")
	}
	if password == "" {
		password = e.getenv("NODEWATCH_PASSWORD")
	}
	if password != "" {
		return name, password, nil
	}
	f, ok := e.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", "", usagef("--user %s: no password: give --user NAME:PASSWORD, set NODEWATCH_PASSWORD, or run on a terminal to be asked for it", name)
	}
	password, err = readPassword(ctx, int(f.Fd()), func() {
		fmt.Fprintf(e.stderr, "nodewatch: password for etcd user %s: ", name)
	})
	fmt.Fprintln(e.stderr)
	switch {
	case errors.Is(err, context.Canceled):
		return "", "", errInterrupted
	case err != nil:
		return "", "", fmt.Errorf("--user %s: read the password: %w", name, err)
	case password == "":
		return "", "", usagef("--user %s: the password is empty", name)
	}
	return name, password, nil
}

// readPassword turns the echo of the terminal fd off, prompts, and reads
// a line; it restores the terminal as it was. It
// returns ctx.Err() when ctx ends first (Ctrl-C, with the signal context),
// with the terminal as it was: term.ReadPassword would block until a line
// came, with the echo off.
func readPassword(ctx context.Context, fd int, prompt func()) (string, error) {
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
