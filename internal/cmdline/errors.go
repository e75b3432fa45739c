package cmdline

import "fmt"

// ExitUsage is the exit code of a usage error.
const ExitUsage = 2

// Error is an error that chooses the process's exit code: only
// nodewatch's own errors do. gojq's errors carry an ExitCode too (error:
// 5, halt_error(N): N), which must not leak.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }
func (e *Error) ExitCode() int { return e.Code }

// Usagef is a bad flag, argument or jq expression (exit 2).
func Usagef(format string, args ...any) error {
	return &Error{ExitUsage, fmt.Errorf(format, args...)}
}

// Usage marks err as a usage error.
func Usage(err error) error { return &Error{ExitUsage, err} }
