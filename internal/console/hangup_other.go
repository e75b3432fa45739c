//go:build !linux

package console

import (
	"context"
	"io"
)

// WaitHangup blocks until ctx ends and returns false: only Linux reports a
// pipe's reader going away to a writer that is not writing. Elsewhere the
// next write notices it (EPIPE), as it does for any program in a pipeline.
func WaitHangup(ctx context.Context, w io.Writer) bool {
	<-ctx.Done()
	return false
}
