package render

import (
	"fmt"
	"time"
)

// ReportEvery is how often a failure that keeps happening (a program
// that fails, a --check that refuses, an owner that cannot be kept) is
// reported again: the first one in full, then at most one every
// ReportEvery, with the count of those held back since.
const ReportEvery = 10 * time.Second

// what a report is about: a kind of failure and the file.
type what struct {
	kind string // "program", "check", "owner"
	to   string
}

// failing is the state of one kind of failure of one file.
type failing struct {
	last time.Time // when it was last reported
	held int       // failures since then, not reported
}

// reporter rate-limits the warnings of a Renderer. Its owner's mutex
// guards it.
type reporter struct {
	logf  func(format string, args ...any)
	now   func() time.Time
	every time.Duration
	m     map[what]*failing
}

// fail reports a failure of w, described by msg, unless one was reported
// less than every ago: then it counts it.
func (r *reporter) fail(w what, msg string) {
	if r.m == nil {
		r.m = make(map[what]*failing)
	}
	now := r.now()
	f := r.m[w]
	switch {
	case f == nil:
		r.m[w] = &failing{last: now}
	case now.Sub(f.last) < r.every:
		f.held++
		return
	default:
		if f.held > 0 {
			msg += fmt.Sprintf(" (and %d more times since %s)", f.held, f.last.Format(time.TimeOnly))
		}
		f.last, f.held = now, 0
	}
	r.logf("%s", msg)
}

// ok ends a run of failures of w, if there was one: msg says so, with the
// count of failures not reported.
func (r *reporter) ok(w what, msg string) {
	f := r.m[w]
	if f == nil {
		return
	}
	delete(r.m, w)
	if f.held > 0 {
		msg += fmt.Sprintf(" (after %d more failures since %s)", f.held, f.last.Format(time.TimeOnly))
	}
	r.logf("%s", msg)
}
