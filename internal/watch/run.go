// Package watch is nodewatch's pipeline: a source (the etcd watcher, the
// Curator client) hands batches through a handoff.Queue to a
// view.Follower, whose events a stream.Encoder writes, until a goal is
// met or something stops the run.
//
// It owns every goroutine of a run and every way a run ends, so that the
// command line only turns flags into Options and a Result into an exit
// code. The rules it keeps:
//
//   - The source never waits for the output: it puts batches into the
//     queue, which merges them when the reader is slow (see handoff).
//   - Output is flushed at the end of every batch, so a reader sees whole
//     batches, before the loop waits for the next; while batches are
//     queued, several are written out at once (holding, about 5 ms).
//     A run that ends flushes what it printed first.
//   - A run ends for exactly one reason (Stop): its goal was met, its
//     timeout passed, its context ended (a signal), its output was
//     closed, or it failed (the source, the output or a --strict jq
//     error). A goal met is final: a timeout that passes while the last
//     lines are being written does not undo it.
//   - A reader that stopped reading cannot keep a run alive: once the run
//     has to end, a write still blocked after WriteGrace is abandoned.
//   - jq evaluation runs under the run's context, so a slow filter over a
//     large listing stops with the run.
package watch

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handoff"
	"github.com/nodewatch/nodewatch/internal/progress"
	"github.com/nodewatch/nodewatch/internal/stream"
	"github.com/nodewatch/nodewatch/internal/view"
)

// Errors that end a run's context, as its cause.
var (
	errTimeout      = errors.New("timeout passed")
	errOutputClosed = errors.New("output closed")
	errGoalMet      = errors.New("goal met")
)

// Run runs the pipeline from src to w until the run ends, and says why.
// The error is non-nil exactly when Stop is Failed. Run blocks; every
// goroutine it starts has ended when it returns, but for one: the reader
// of the batches, when it is still blocked writing to w WriteGrace after
// the run had to end. It is abandoned: it ends once w returns, and writes
// nothing more.
func Run(ctx context.Context, src Source, w io.Writer, o Options) (Result, error) {
	// A plain cancellation, not a deadline, ends the run on timeout: a
	// deadline would travel to servers with every gRPC call, and its end
	// would look like a broken stream there.
	if o.OneProc {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.Timeout > 0 {
		t := time.AfterFunc(o.Timeout, func() { cancel(errTimeout) })
		defer t.Stop()
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil) // runs before wg.Wait

	lister := o.Lister
	streaming := lister != nil && o.Once && o.Until == nil && o.Each == nil && o.FailIf == nil && !o.delivers() && o.State == nil && o.Resume == nil
	q := handoff.New(0)
	sink := &sink{Queue: q, m: o.Progress}
	if o.Progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.Progress.Run(runCtx)
		}()
	}
	if !streaming {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.Close(src.Run(runCtx, sink))
		}()
	}
	if o.Hangup != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o.Hangup(runCtx) {
				cancel(errOutputClosed)
			}
		}()
	}

	grace := o.WriteGrace
	if grace <= 0 {
		grace = DefaultWriteGrace
	}
	out := &gate{w: w}
	// The loop writes out the lines of several batches at once while more
	// are queued (holding): not for a terminal, which shows each line as
	// it comes, nor for a handler or a --state record, which take each
	// batch as it was written out, nor with --until or --each, which
	// evaluate the whole view after a batch.
	o.Output.HoldBatches = !o.Output.FlushEachLine && !o.delivers() && o.State == nil && o.Until == nil && o.Each == nil
	r := &run{
		parent: ctx,
		ctx:    runCtx,
		o:      &o,
		enc:    stream.NewEncoder(out, o.Output),
		warn:   newWarnings(o.Logf, o.WarnEvery),
		stable: stability{dur: o.Stable},
	}
	defer r.warn.flush()
	r.fol = view.NewFollower(r.filterFunc(), r.equalsFunc())
	// Printed, an event's objects are bytes in the output: the objects
	// that leave the view are free once a batch is. A handler's runs
	// (the states it had) and a --state record keep them longer.
	r.fol.Recycle = !o.delivers() && o.State == nil
	if o.Resume != nil {
		r.resume(o.Resume)
	}

	// The reader of the batches writes to w itself: a goroutine per
	// write would cost two wakeups a line. Run waits for it, and gives
	// up on it WriteGrace after the run had to end: only a write to a
	// reader that stopped reading (`| sleep 60`, a paused pager) can
	// hold it that long, and a signal or a timeout must still end the
	// run.
	type ended struct {
		res Result
		err error
	}
	done := make(chan ended, 1)
	go func() {
		var e ended
		switch {
		case streaming:
			e.res, e.err = r.list(lister)
		case o.delivers():
			e.res, e.err = r.execLoop(q)
		default:
			e.res, e.err = r.loop(q)
		}
		// A screen the output drew on is given back (a goal met leaves
		// its last state there), before Run returns and its caller
		// writes a report or an error.
		r.enc.Close(e.res.Stop == GoalMet)
		done <- e
	}()
	select {
	case e := <-done:
		return e.res, e.err
	case <-runCtx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case e := <-done:
		return e.res, e.err
	case <-t.C:
		out.close()
		return r.abandon()
	}
}

// sink is the queue as a source's Sink, with the progress meter (m, if
// any), whose listing the full batch a source puts ends.
type sink struct {
	*handoff.Queue
	m *progress.Meter
}

func (s *sink) Put(b flow.Batch) {
	if s.m != nil && b.Full() {
		s.m.Done()
	}
	s.Queue.Put(b)
}

// run is the state of one Run, used by its reading goroutine (and, once
// that is abandoned, by Run, through abandon).
type run struct {
	parent, ctx context.Context
	o           *Options
	warn        *warnings
	enc         *stream.Encoder
	fol         *view.Follower
	res         Result

	// What abandon reports; res keeps the same counts.
	received        atomic.Bool
	events, batches atomic.Int64

	// For Heartbeat: when a line was last printed, when the source last
	// confirmed it is current, and the newest revision it confirmed.
	lastPrint, confirmedAt time.Time
	confirmedRev           int64
	// everSeen: the view held an object after some batch (Report).
	everSeen bool

	// tripped: the objects that met FailIf (failif.go); moreTripped
	// counts those past MaxUnmet.
	tripped     []Unmet
	trippedIDs  map[string]bool
	moreTripped int
	// stable: how long the goal has held (Stable); settler: when a
	// delivery is due (Settle).
	stable  stability
	settler settler

	// resuming: the next full batch is the first after Resume. batchBase
	// is the number of the last batch delivered before this run.
	resuming  bool
	batchBase int
	// again: the ids the first full batch delivers again (resume).
	again map[string]any
	// With State: the events of the batch being printed, and whether it
	// ended (a batch_done, printed or kept silent) at rev.
	recording []flow.Event
	ended     bool
	endedRev  int64
	// heldSince is when the loop began to hold lines (holding); zero
	// when it holds none.
	heldSince time.Time
	// With Exec: what the handler has not been given yet (deliver.go).
	undelivered
	// hints: what the hint after the first synced batch needs (hint.go).
	hints hints
}

// abandon is the Result of a run whose reader of the batches is blocked
// writing to a reader that does not read.
func (r *run) abandon() (Result, error) {
	res := Result{Received: r.received.Load(), Events: int(r.events.Load()), Batches: int(r.batches.Load())}
	return r.stop(res, errWriteAbandoned)
}

func (r *run) loop(q *handoff.Queue) (Result, error) {
	for {
		b, err := r.next(q)
		if errors.Is(err, errDue) {
			if r.stable.held(time.Now()) {
				return r.goalMet()
			}
			if err := r.heartbeat(); err != nil {
				return r.end(err)
			}
			continue
		}
		if err == nil && r.ctx.Err() != nil {
			err = r.ctx.Err() // queued batches wait in vain once the run has to end
		}
		if err != nil {
			r.enc.Flush()
			return r.end(err)
		}
		r.res.Received = true
		r.received.Store(true)
		if b.Confirmed {
			r.confirmedAt = time.Now()
			r.confirmedRev = max(r.confirmedRev, b.Rev)
		}
		held := r.enc.Buffered() // the lines of whole batches (holding)
		changed, err := r.apply(b)
		if errors.Is(err, errGoalMet) {
			if err := r.enc.Flush(); err != nil {
				return r.end(err)
			}
			if err := r.record(); err != nil {
				return r.end(err)
			}
			if len(r.tripped) > 0 {
				return r.failed()
			}
			return r.goalMet()
		}
		if err != nil {
			// The batches held before this one are written out; what
			// this one printed before it failed is not.
			r.enc.Truncate(held)
			r.enc.Flush()
			return r.end(err)
		}
		if !r.holding(q, b) || len(r.tripped) > 0 {
			err = r.enc.Flush()
		}
		if err == nil {
			err = r.record()
		}
		if err != nil {
			return r.end(err)
		}
		if len(r.tripped) > 0 {
			return r.failed()
		}
		if b.Synced {
			r.hint(r.fol.Set().Len() == 0)
		}
		if r.o.Once && b.Synced {
			return r.goalMet()
		}
		if !b.Full() {
			// Nothing of the run keeps a change batch's slice once it
			// is applied (the follower copies what it keeps): the
			// source's next batch is copied into it.
			q.Recycle(b.Changes)
		}
		settle(&b)
		if r.fol.Set().Len() > 0 {
			r.everSeen = true
		}
		if done, err := r.goalHeld(changed, changed || b.Synced); err != nil || done {
			return r.endGoal(err)
		}
	}
}

// apply prints what b changes and reports whether the view changed.
func (r *run) apply(b flow.Batch) (changed bool, err error) {
	r.resumed(&b)
	silent := r.o.ChangesOnly && b.Cause == flow.CauseInitial
	if r.o.State != nil {
		return r.applyRecorded(b, silent)
	}
	err = r.follow(b, func(ev flow.Event) error {
		changed = true
		if silent {
			return nil
		}
		return r.print(ev)
	})
	return changed, err
}

// goalMet ends the run with its goal met, once what was printed is out.
func (r *run) goalMet() (Result, error) {
	if err := r.enc.Flush(); err != nil {
		return r.end(err)
	}
	r.res.Stop = GoalMet
	if r.o.AlwaysReport {
		r.res.Report = r.report()
	}
	return r.res, nil
}

// endGoal ends the run once its goal held (err nil), or with err.
func (r *run) endGoal(err error) (Result, error) {
	if err != nil {
		return r.end(err)
	}
	return r.goalMet()
}

// failed ends the run with FailConditionMet, once what was printed is
// out.
func (r *run) failed() (Result, error) {
	if err := r.enc.Flush(); err != nil {
		return r.end(err)
	}
	if r.o.Stable > 0 {
		r.goalHeld(true, true) // the report says whether the goal still holds
	}
	r.res.Stop = FailConditionMet
	r.res.Report = r.report()
	return r.res, nil
}

// end turns the reason the run stops into its Result, with a Report when
// a goal was set and not met.
func (r *run) end(err error) (Result, error) {
	res, err := r.stop(r.res, err)
	res.Missed = r.o.hasGoal() && r.res.Received && (res.Stop == TimedOut || res.Stop == Interrupted)
	if res.Missed || r.o.AlwaysReport {
		res.Report = r.report()
	}
	return res, err
}

// stop completes res with why the run stops, err being what ended it.
func (r *run) stop(res Result, err error) (Result, error) {
	switch cause := context.Cause(r.ctx); {
	case r.parent.Err() != nil:
		res.Stop = Interrupted
	case errors.Is(cause, errOutputClosed), stream.IsClosedPipe(err):
		res.Stop = OutputClosed
	case errors.Is(cause, errTimeout):
		res.Stop = TimedOut
		res.GoalUnmet = r.o.hasGoal()
	default:
		res.Stop = Failed
		return res, err
	}
	return res, nil
}
