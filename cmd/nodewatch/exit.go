package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/nodewatch/nodewatch/internal/curator/client"
	"github.com/nodewatch/nodewatch/internal/etcdkv"
)

// Exit codes, as README.md and docs/reference.md list them. This file is
// the one place that maps errors to them.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitUnavailable = 3
	exitTimeout     = 124
	exitInterrupted = 130
)

// usageError is a bad flag, argument or jq expression.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
func (e *usageError) ExitCode() int { return exitUsage }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// unavailableError: no connection within --dial-timeout or --timeout.
// (Sources report the same with their ErrUnavailable.)
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }
func (e *unavailableError) ExitCode() int { return exitUnavailable }

// goalTimeoutError: --timeout passed with a goal unmet.
type goalTimeoutError struct{ goal string }

func (e *goalTimeoutError) Error() string {
	return fmt.Sprintf("timed out before %s", e.goal)
}
func (e *goalTimeoutError) ExitCode() int { return exitTimeout }

// errOutputClosed: the reader of stdout went away; ending is the point.
var errOutputClosed = errors.New("output closed")

// errInterrupted: SIGINT or SIGTERM (the run's context was cancelled).
var errInterrupted = errors.New("interrupted")

// exitCode returns the exit code for err and whether err deserves a
// message on stderr.
func exitCode(err error) (code int, report bool) {
	// Only nodewatch's own errors choose their code: gojq's errors carry
	// an ExitCode too (error: 5, halt_error(N): N), which must not leak.
	var (
		usage   *usageError
		unavail *unavailableError
		goal    *goalTimeoutError
	)
	switch {
	case err == nil:
		return exitOK, false
	case errors.As(err, &usage):
		return usage.ExitCode(), true
	case errors.As(err, &unavail):
		return unavail.ExitCode(), true
	case errors.As(err, &goal):
		return goal.ExitCode(), true
	case errors.Is(err, etcdkv.ErrUnavailable), errors.Is(err, client.ErrUnavailable):
		return exitUnavailable, true
	case errors.Is(err, errInterrupted), errors.Is(err, context.Canceled):
		return exitInterrupted, false
	case isClosedPipe(err), errors.Is(err, errOutputClosed):
		// The reader went away (| head -1): ending quietly is the point.
		return exitOK, false
	}
	return exitFailure, true
}

// isClosedPipe reports whether err comes from writing to a closed pipe.
func isClosedPipe(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrClosedPipe)
}
