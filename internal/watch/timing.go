package watch

import (
	"context"
	"errors"
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handoff"
)

// Two clocks decide when a run acts without a batch to act on: a goal
// that must hold for a while (Stable) and a delivery that waits for the
// changes to settle (Settle). Each is a plain value that is told what
// happened and when, and says when it is due; the loops wait for a batch
// or that moment, whichever comes first (nextBefore). Neither reads the
// clock itself, so their rules are tested over made-up timelines.

// Settle is --settle MIN[:MAX], consul-template's wait: a delivery is
// due once no change came for Min, or Max after the first change not yet
// delivered, whichever is first. The zero value delivers at once.
type Settle struct{ Min, Max time.Duration }

// settler times the deliveries of a run under Settle.
type settler struct {
	Settle
	// first and last are when the first and the latest change not yet
	// delivered came; zero when every change was delivered.
	first, last time.Time
}

// changed notes a change that came at now.
func (s *settler) changed(now time.Time) {
	if s.first.IsZero() {
		s.first = now
	}
	s.last = now
}

// due is when the changes noted are to be delivered: zero when none
// waits, or without Settle (deliver at once).
func (s *settler) due() time.Time {
	if s.Min <= 0 || s.first.IsZero() {
		return time.Time{}
	}
	d := s.last.Add(s.Min)
	if hard := s.first.Add(s.Max); s.Max > 0 && hard.Before(d) {
		d = hard
	}
	return d
}

// waits reports whether a delivery is to wait at now.
func (s *settler) waits(now time.Time) bool {
	d := s.due()
	return !d.IsZero() && now.Before(d)
}

// delivered notes that every change noted was delivered.
func (s *settler) delivered() { s.first, s.last = time.Time{}, time.Time{} }

// stability tracks whether a goal has held for Stable without a break.
type stability struct {
	dur time.Duration
	// since is when the goal began to hold, zero while it does not;
	// lastHeld how long it held before it last broke.
	since    time.Time
	lastHeld time.Duration
}

// observe notes whether the goal holds at now, and reports whether the
// run ends with it: at once without Stable, else once it has held for
// dur (see held).
func (s *stability) observe(now time.Time, met bool) bool {
	switch {
	case s.dur <= 0:
		return met
	case met && s.since.IsZero():
		s.since = now
	case !met && !s.since.IsZero():
		s.lastHeld, s.since = now.Sub(s.since), time.Time{}
	}
	return s.held(now)
}

// held reports whether the goal has held for dur at now.
func (s *stability) held(now time.Time) bool {
	return s.dur > 0 && !s.since.IsZero() && !now.Before(s.since.Add(s.dur))
}

// due is when the goal will have held for dur, if nothing breaks it;
// zero while it does not hold.
func (s *stability) due() time.Time {
	if s.dur <= 0 || s.since.IsZero() {
		return time.Time{}
	}
	return s.since.Add(s.dur)
}

// heldFor is how long the goal has held at now (holding), or held the
// last time before it broke; zero if it never held.
func (s *stability) heldFor(now time.Time) (d time.Duration, holding bool) {
	if !s.since.IsZero() {
		return now.Sub(s.since), true
	}
	return s.lastHeld, false
}

// earliest is the earlier of two moments, a zero one being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// errDue: the moment nextBefore was given came before a batch.
var errDue = errors.New("due")

// nextBefore waits for the next batch, or until deadline (none when
// zero), when it returns errDue.
func (r *run) nextBefore(q *handoff.Queue, deadline time.Time) (flow.Batch, error) {
	if deadline.IsZero() {
		return q.Next(r.ctx)
	}
	ctx, cancel := context.WithDeadline(r.ctx, deadline)
	defer cancel()
	b, err := q.Next(ctx)
	if err != nil && r.ctx.Err() == nil && ctx.Err() != nil {
		return b, errDue
	}
	return b, err
}
