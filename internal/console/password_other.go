//go:build !linux

package console

import (
	"context"

	"golang.org/x/term"
)

// readPassword prompts and reads a line with x/term, which turns the echo
// off; when ctx ends first, the read, which cannot be interrupted here, is
// abandoned.
func readPassword(ctx context.Context, fd int, prompt func()) (string, error) {
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
