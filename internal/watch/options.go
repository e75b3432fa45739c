package watch

import (
	"context"
	"time"

	"github.com/nodewatch/nodewatch/internal/enum"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/progress"
	"github.com/nodewatch/nodewatch/internal/stream"
)

// Source produces the batches of one watch.
type Source interface {
	// Run puts batches into out, in order, until ctx ends or the source
	// fails for good. The first batch is the full initial state
	// (flow.CauseInitial). Run returns ctx.Err() (or anything, once ctx
	// has ended) when ctx ends, or the error it failed with. It must not
	// keep out after it returns.
	Run(ctx context.Context, out flow.Sink) error
}

// DefaultWriteGrace is how long a blocked write may still finish once a
// run has to end, unless Options.WriteGrace says otherwise.
const DefaultWriteGrace = time.Second

// Options say what a run prints and when it ends. The zero value prints
// every change as NDJSON until the context ends.
type Options struct {
	// Filter, Equals and Until are the user's jq programs (nil: none).
	// Filter decides which objects are of interest, Equals which changes
	// count (nil compares whole objects), Until ends the run once it holds
	// over the printed view.
	Filter, Equals, Until *jq.Program
	// EqualsField, without Equals, compares two states of an object by
	// the bytes of this member of their JSON alone (key's "value": its
	// objects carry revisions that change with every put). Without either,
	// whole objects are compared by their bytes. Bytes, not jq's equality:
	// two states the user sees printed differently are never the same.
	EqualsField string
	// Each, if set, ends the run once every object (at least one) satisfies
	// it, or, with AtLeast > 0, once at least AtLeast objects do.
	Each    *jq.Program
	AtLeast int
	// FailIf, if set, ends the run (FailConditionMet) once an object
	// that enters or changes in the view satisfies it, after the batch
	// that brought it is printed or delivered: a CI wait fails at once
	// instead of waiting out its timeout. Whichever of it and the goal
	// comes first decides; within one batch, the failure.
	FailIf *jq.Program
	// Stable > 0: the goal (Until, Each) must hold without a break for
	// Stable before the run ends with it; a batch that breaks it starts
	// the clock again.
	Stable time.Duration
	// List: Until sees the view as an array of objects in id order (a
	// prefix, every node); otherwise the one object, or null.
	List bool
	// Strict: a jq evaluation error fails the run; otherwise it is
	// reported through Logf and counts as "no match" ("not equal").
	Strict bool

	// Once: end after the first synced batch (the initial state).
	Once bool
	// Count > 0: end after Count new/updated/deleted events.
	Count int
	// Timeout > 0: end after Timeout, whatever happens.
	Timeout time.Duration
	// ChangesOnly: build the initial state silently; print later changes.
	ChangesOnly bool

	// Output configures the encoder.
	Output stream.Options
	// Logf reports warnings (jq evaluation errors without Strict): the
	// first of each kind in full, then at most every WarnEvery (0:
	// DefaultWarnEvery) how many more there were, and at the end of the
	// run what is still uncounted. Nil discards them.
	Logf      func(format string, args ...any)
	WarnEvery time.Duration
	// Hangup, if set, blocks until the reader of the output has gone away
	// (it returns true) or ctx has ended (false), so that an idle run
	// notices a closed pipe. Run calls it once, in a goroutine it owns.
	Hangup func(ctx context.Context) bool
	// WriteGrace: see DefaultWriteGrace; 0 means the default.
	WriteGrace time.Duration
	// Progress, if set, hears how full listings advance (the source's, or
	// the pages of --once) and shows it; Run runs it while the run lasts.
	Progress *progress.Meter
	// Heartbeat > 0: when nothing was printed for Heartbeat, print a
	// heartbeat line, if the source confirmed within the last Heartbeat
	// that it is current (a Confirmed batch); it names Confirms as what
	// was confirmed, and the newest revision confirmed (never lower than
	// one printed before). No confirmation, no heartbeat: its absence is
	// the news. The source must confirm at least every Heartbeat/2.
	Heartbeat time.Duration
	Confirms  string
	// Exec, if set, delivers every batch with something to deliver to a
	// handler instead of printing it (--exec; see deliver.go): input holds
	// the NDJSON lines the batch would have printed, done its batch_done;
	// attempt counts from 1. A nil error is a delivery. Retries bounds the
	// runs after a failed one.
	Exec        func(ctx context.Context, input []byte, done flow.Event, attempt int) error
	ExecRetries int
	// ExecBackoffMax caps the wait before a retry; 0 means
	// DefaultExecBackoffMax.
	ExecBackoffMax time.Duration
	// Render, if set, is delivered the view (as Until sees it) instead of
	// the events, once at the start and then whenever the view changed
	// (--render): in the place of Exec, with its retries.
	Render func(ctx context.Context, view any, attempt int) error
	// Settle, with Exec or Render, holds a delivery back until the
	// changes settle (--settle).
	Settle Settle
	// State, if set, records each batch once it is delivered (printed and
	// flushed, or its handler succeeded), the batches that --changes-only
	// keeps silent included.
	State Recorder
	// Resume, if set, is the view an earlier run delivered: the run
	// starts from it, and its first full batch, cause "resume", holds
	// what differs. Batch numbers go on from Resume.Batch.
	Resume *Resume

	// OneProc runs the pipeline on one P (GOMAXPROCS=1) for the length of
	// the run. A watch is a pipeline of goroutines handing over one event at
	// a time: on one P a hand-over is a run-queue push; on two it wakes a
	// sleeping thread and an idle P spins looking for work. Following a
	// live stream with a --filter, on two cores, that was a seventh of
	// nodewatch's CPU, and a --once listing of 100,000 records got faster
	// too (measured with make bench-compare). The command sets it unless
	// the user set GOMAXPROCS; tests leave their process alone.
	OneProc bool

	// AlwaysReport: the Result has a Report however the run ended
	// (--report FILE is written on success too), not only when a goal
	// was missed.
	AlwaysReport bool

	// Hinter, if set, is the run's source as it looks around what it
	// follows, handed in by whoever built the source: the run asks it
	// for a hint when the view is empty after the initial state (see
	// hint.go). Its hint goes to Logf.
	Hinter Hinter

	// Lister, if set, is the run's source as it reads its state once
	// (usually the Source itself), handed in by whoever built the source:
	// --once without a goal that needs the view prints it page by page.
	Lister Lister
}

// Recorder records delivered batches (state.Store).
type Recorder interface {
	// MarkInFlight records that events are about to be delivered (their
	// first byte written out, or their handler started), adding to what
	// is in flight; Record forgets them.
	MarkInFlight(events []flow.Event) error
	// Record records that the batch numbered batch, bringing the view to
	// rev, was delivered with events (new, updated, deleted).
	Record(batch int, rev int64, events []flow.Event) error
}

// Resume is a view recorded by an earlier run, and what that run had
// in flight when it ended: events it may have delivered and did not
// record (Object the state given; Prev, for a deletion). The run
// delivers each id in flight first, in its first full batch, whatever
// the view holds: its consumer may have taken those states, or not.
type Resume struct {
	View     []flow.Change
	InFlight []flow.Event
	Batch    int
}

// hasGoal reports whether anything ends the run successfully.
func (o *Options) hasGoal() bool { return o.Until != nil || o.Each != nil || o.Once || o.Count > 0 }

// delivers reports whether batches go to a handler (Exec, Render)
// rather than to the output.
func (o *Options) delivers() bool { return o.Exec != nil || o.Render != nil }

// Stop is why a run ended.
type Stop int

const (
	// GoalMet: --once, --count or --until was met, and everything
	// printed was written.
	GoalMet Stop = iota + 1
	// TimedOut: Options.Timeout passed first.
	TimedOut
	// Interrupted: the context given to Run ended (a signal).
	Interrupted
	// OutputClosed: the reader of the output went away.
	OutputClosed
	// Failed: the source failed, the output failed, or a jq program
	// failed under Strict; Run's error says how.
	Failed
	// FailConditionMet: an object satisfied FailIf; the Report names
	// each that did.
	FailConditionMet
)

// stopNames are the names of the ways a run ends.
var stopNames = enum.Names[Stop]{"", "goal met", "timed out", "interrupted", "output closed", "failed", "failure condition met"}

// String returns the name of s.
func (s Stop) String() string { return stopNames.String(s) }

// Result is how a run ended.
type Result struct {
	Stop Stop
	// GoalUnmet: Stop is TimedOut and a goal (Until, Each, Once, Count)
	// was set.
	GoalUnmet bool
	// Missed: a goal was set, and the run timed out or was interrupted
	// after the source delivered a batch (not when its reader was
	// abandoned). The sources retry a lost connection for ever: a timeout
	// is how a wait on a source that is gone ends.
	Missed bool
	// Report says how far the run got toward its goal: when it Missed
	// it, when FailIf ended the run, and with AlwaysReport however it
	// ended.
	Report *Report
	// Received: the source delivered at least one batch (it connected).
	Received bool
	// Events and Batches count the new/updated/deleted and batch_done
	// lines printed.
	Events, Batches int
}

// Hooks returns what a run with o offers its source, for the source to be
// built with: the filter where its fast path answers without an error
// (which is all the follower would do with it: an error is left to the
// follower to report, or to end the run), and the progress meter's count
// of a listing.
func (o *Options) Hooks() flow.Hooks {
	var h flow.Hooks
	if o.Filter != nil {
		h.Keeps = o.Filter.TruthyFast
	}
	if o.Progress != nil {
		h.Listed = o.Progress.Listed
	}
	return h
}
