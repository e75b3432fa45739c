// Package backoff is the capped exponential backoff that every reconnect
// loop in nodewatch uses: 100ms, doubling, never more than a cap, and
// every wait ends early when its context does.
package backoff

import (
	"context"
	"time"
)

// Initial is the first wait.
const Initial = 100 * time.Millisecond

// DefaultMax caps the wait when Backoff.Max is zero.
const DefaultMax = 5 * time.Second

// Backoff hands out growing waits. The zero value starts at Initial and is
// capped at DefaultMax. It is not safe for concurrent use.
type Backoff struct {
	// Max caps the wait; 0 means DefaultMax.
	Max time.Duration
	d   time.Duration
}

// Next returns the next wait: Initial, then doubling, at most Max.
func (b *Backoff) Next() time.Duration {
	limit := b.Max
	if limit <= 0 {
		limit = DefaultMax
	}
	b.d = min(max(2*b.d, Initial), limit)
	return b.d
}

// Reset starts again from Initial, after a success.
func (b *Backoff) Reset() { b.d = 0 }

// Wait sleeps for Next() or until ctx ends, whichever is first, and
// returns ctx.Err() in the latter case.
func (b *Backoff) Wait(ctx context.Context) error { return Sleep(ctx, b.Next()) }

// Sleep waits for d or until ctx ends; it returns ctx.Err() if ctx ended.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
