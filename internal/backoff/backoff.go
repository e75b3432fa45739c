// Package backoff is the capped exponential backoff with jitter that every
// reconnect loop in nodewatch uses: a step of 100ms, doubling, never more
// than a cap, each wait drawn at random from the upper half of its step,
// and every wait ends early when its context does.
//
// The jitter is why the package exists rather than a doubling in each
// loop: when one server restarts, all of its clients lose it at the same
// moment. Without jitter they would all come back at the same moments too
// (100ms, 300ms, 700ms … after the loss), every one of them together,
// and keep doing so until the server is back.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Initial is the first step: the first wait is between Initial/2 and
// Initial.
const Initial = 100 * time.Millisecond

// DefaultMax caps the step when Backoff.Max is zero.
const DefaultMax = 5 * time.Second

// Backoff hands out growing waits. The zero value starts at Initial and is
// capped at DefaultMax. It is not safe for concurrent use.
type Backoff struct {
	// Max caps the step, and so every wait; 0 means DefaultMax.
	Max time.Duration
	d   time.Duration // the last step
}

// Next returns the next wait. The step is Initial, then doubling, at most
// Max; the wait is drawn uniformly from [step/2, step] ("equal jitter"),
// so that waits stay within [Initial/2, Max] (or [Max/2, Max] when Max is
// below Initial) and clients that failed together spread out. The random
// numbers come from math/rand/v2's generator, which is safe for
// concurrent use and seeded afresh in every process.
func (b *Backoff) Next() time.Duration {
	return jitter(b.step())
}

// step advances and returns the step Next draws its wait below.
func (b *Backoff) step() time.Duration {
	limit := b.Max
	if limit <= 0 {
		limit = DefaultMax
	}
	b.d = min(max(2*b.d, Initial), limit)
	return b.d
}

// jitter returns a wait drawn uniformly from [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return d - half + rand.N(half+1)
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
