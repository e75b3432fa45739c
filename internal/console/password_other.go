//go:build !linux

package console

import (
	"context"

	"golang.org/x/term"
)

// ReadPassword turns the echo of the terminal fd off, prompts, and reads
// a line with x/term; it restores the terminal as it was. It returns
// ctx.Err() when ctx ends first (Ctrl-C), with the terminal restored; the
// read itself cannot be interrupted here and is abandoned.
func ReadPassword(ctx context.Context, fd int, prompt func()) (string, error) {
	saved, err := term.GetState(fd)
	if err != nil {
		return "", err
	}
	defer term.Restore(fd, saved)
	prompt()
	type result struct {
		line []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := term.ReadPassword(fd)
		got <- result{line, err}
	}()
	select {
	case r := <-got:
		return string(r.line), r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
