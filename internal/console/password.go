package console

import (
	"context"

	"golang.org/x/term"
)

// ReadPassword turns the echo of the terminal fd off, prompts, and reads
// a line; it restores the terminal as it was. It returns ctx.Err() when
// ctx ends first (Ctrl-C, with the signal context), with the terminal as
// it was: term.ReadPassword alone would block until a line came, with
// the echo off. On Linux the read waits in poll(2) and gives up; elsewhere
// x/term's read cannot be interrupted and is abandoned.
func ReadPassword(ctx context.Context, fd int, prompt func()) (string, error) {
	saved, err := term.GetState(fd)
	if err != nil {
		return "", err
	}
	defer term.Restore(fd, saved)
	return readPassword(ctx, fd, prompt)
}
