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
	"fmt"
	"io"
	"reflect"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodewatch/nodewatch/internal/enum"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handoff"
	"github.com/nodewatch/nodewatch/internal/jq"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
	"github.com/nodewatch/nodewatch/internal/progress"
	"github.com/nodewatch/nodewatch/internal/stream"
	"github.com/nodewatch/nodewatch/internal/view"
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

// Lister is a Source that can also read its state once, without
// watching, and hand it over page by page in ascending id order. Run uses
// it for --once (without --until), so that a large listing is printed as
// it arrives instead of being held whole: memory for one page, and the
// first line out before the last page is in.
type Lister interface {
	// List hands the state to page, one page at a time, every id once,
	// pages in ascending id order, and returns the revision of the
	// state (0 when unknown). An error from page ends it and is returned.
	List(ctx context.Context, page func([]flow.Change) error) (rev int64, err error)
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
}

// Recorder records delivered batches (state.Store).
type Recorder interface {
	// Record records that the batch numbered batch, bringing the view to
	// rev, was delivered with events (new, updated, deleted).
	Record(batch int, rev int64, events []flow.Event) error
}

// Resume is a view recorded by an earlier run.
type Resume struct {
	View  []flow.Change
	Batch int
}

// hasGoal reports whether anything ends the run successfully.
func (o *Options) hasGoal() bool { return o.Until != nil || o.Each != nil || o.Once || o.Count > 0 }

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
)

// stopNames are the names of the ways a run ends.
var stopNames = enum.Names[Stop]{"", "goal met", "timed out", "interrupted", "output closed", "failed"}

// String returns the name of s.
func (s Stop) String() string { return stopNames.String(s) }

// Result is how a run ended.
type Result struct {
	Stop Stop
	// GoalUnmet: Stop is TimedOut and a goal (Until, Each, Once, Count)
	// was set.
	GoalUnmet bool
	// Report says how far the run got toward its goal, when one was set
	// and the run timed out or was interrupted after the source delivered
	// a batch (not when its reader was abandoned). The sources retry a
	// lost connection for ever: a timeout is how a wait on a source that
	// is gone ends.
	Report *Report
	// Received: the source delivered at least one batch (it connected).
	Received bool
	// Events and Batches count the new/updated/deleted and batch_done
	// lines printed.
	Events, Batches int
}

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

	lister, streaming := src.(Lister)
	streaming = streaming && o.Once && o.Until == nil && o.Each == nil && o.Exec == nil && o.State == nil && o.Resume == nil
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
	o.Output.HoldBatches = !o.Output.FlushEachLine && o.Exec == nil && o.State == nil && o.Until == nil && o.Each == nil
	r := &run{
		parent: ctx,
		ctx:    runCtx,
		o:      &o,
		enc:    stream.NewEncoder(out, o.Output),
		warn:   newWarnings(o.Logf, o.WarnEvery),
	}
	defer r.warn.flush()
	r.fol = view.NewFollower(r.filterFunc(), r.equalsFunc())
	// Printed, an event's objects are bytes in the output: the objects
	// that leave the view are free once a batch is. A handler's runs
	// (the states it had) and a --state record keep them longer.
	r.fol.Recycle = o.Exec == nil && o.State == nil
	if o.Resume != nil {
		r.fol.Load(o.Resume.View)
		r.resuming, r.batchBase = true, o.Resume.Batch
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
		case o.Exec != nil:
			e.res, e.err = r.execLoop(q)
		default:
			e.res, e.err = r.loop(q)
		}
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

	// resuming: the next full batch is the first after Resume. batchBase
	// is the number of the last batch delivered before this run.
	resuming  bool
	batchBase int
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
		if errors.Is(err, errHeartbeat) {
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
			return r.goalMet()
		}
		if err != nil {
			// The batches held before this one are written out; what
			// this one printed before it failed is not.
			r.enc.Truncate(held)
			r.enc.Flush()
			return r.end(err)
		}
		if !r.holding(q, b) {
			err = r.enc.Flush()
		}
		if err == nil {
			err = r.record()
		}
		if err != nil {
			return r.end(err)
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
		if r.o.Until != nil && changed {
			met, err := r.untilMet()
			if err != nil {
				return r.end(err)
			}
			if met {
				return r.goalMet()
			}
		}
		if r.o.Each != nil && (changed || b.Synced) {
			met, err := r.eachMet()
			if err != nil {
				return r.end(err)
			}
			if met {
				return r.goalMet()
			}
		}
	}
}

// holdFor and holdUpTo bound how long and how many bytes of lines the
// loop holds while batches are queued (holdFor is a variable for the
// tests, which must not depend on how loaded the machine is).
var holdFor = 5 * time.Millisecond

const holdUpTo = 32 << 10

// holding reports whether the lines printed so far, b's the last, may
// wait for the next batch's, to be written out with them: while the
// reader is behind (a change batch is queued), for about holdFor since
// it began to hold (the time is checked after each batch), and while
// less than holdUpTo bytes are held. Not after a full batch, which
// settle follows. Each batch is still written out whole (unless it is
// larger than holdUpTo), and before the loop waits for one. One write for
// several batches costs less than one for each, and wakes the pipe's
// reader once: following transactions of 50 records of 200 B with a
// --filter, into a pipe read by another process, a write per batch was
// 7% of nodewatch's CPU (its profile under make bench-compare).
func (r *run) holding(q *handoff.Queue, b flow.Batch) bool {
	if !r.o.Output.HoldBatches || b.Full() || r.enc.Buffered() >= holdUpTo || !q.Waiting() {
		r.heldSince = time.Time{}
		return false
	}
	now := time.Now()
	if r.heldSince.IsZero() {
		r.heldSince = now
	}
	if now.Sub(r.heldSince) >= holdFor {
		r.heldSince = time.Time{}
		return false
	}
	return true
}

// errHeartbeat: Heartbeat passed without a batch (from next).
var errHeartbeat = errors.New("heartbeat due")

// next waits for the next batch, and, with Heartbeat, returns
// errHeartbeat once nothing was printed for Heartbeat.
func (r *run) next(q *handoff.Queue) (flow.Batch, error) {
	if r.o.Heartbeat <= 0 {
		return q.Next(r.ctx)
	}
	if r.lastPrint.IsZero() {
		r.lastPrint = time.Now()
	}
	ctx, cancel := context.WithDeadline(r.ctx, r.lastPrint.Add(r.o.Heartbeat))
	defer cancel()
	b, err := q.Next(ctx)
	if err != nil && r.ctx.Err() == nil && ctx.Err() != nil {
		return b, errHeartbeat
	}
	return b, err
}

// heartbeat prints a heartbeat if the source confirmed within the last
// Heartbeat that it is current; either way, the next is due Heartbeat
// later.
func (r *run) heartbeat() error {
	now := time.Now()
	r.lastPrint = now
	if r.confirmedAt.IsZero() || now.Sub(r.confirmedAt) > r.o.Heartbeat {
		return nil
	}
	if err := r.enc.Encode(flow.Event{Type: flow.Heartbeat, Confirmed: r.o.Confirms, Rev: r.confirmedRev}); err != nil {
		return err
	}
	return r.enc.Flush()
}

// apply prints what b changes and reports whether the view changed.
func (r *run) apply(b flow.Batch) (changed bool, err error) {
	r.resumed(&b)
	silent := r.o.ChangesOnly && b.Cause == flow.CauseInitial
	err = r.fol.Apply(b, func(ev flow.Event) error {
		changed = true
		if r.o.State != nil {
			r.keep(ev)
		}
		if silent {
			return nil
		}
		return r.print(ev)
	})
	return changed, err
}

// settle collects, once a full batch b is applied, the garbage it
// leaves: the listing's pages, its changes and the batch, together often
// larger than the view they made. Left to the runtime, they would set the
// heap's goal at twice their peak for as long as the watch runs; for
// 1,000 records of 4 KiB, the goal went from 30 MB to 14 MB, and the peak
// RSS of a run from 50 MB to 47 MB. It lets go of b's changes first: the
// caller's b would keep them reachable. Twice, because gRPC keeps the
// pages' buffers in pools that the first collection only moves aside. It
// costs two collections per listing, which allocated more than the view
// anyway; but not while the heap's goal is below settleMin (settles).
func settle(b *flow.Batch) {
	if !b.Full() {
		return
	}
	b.Changes = nil
	if goal, ok := heapGoal(); ok && !settles(goal) {
		return
	}
	runtime.GC() // also when the goal cannot be read
	runtime.GC()
}

// heapGoal returns the runtime's heap goal in bytes; false if it cannot
// be read.
func heapGoal() (uint64, bool) {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}

// settles reports whether settle collects under a heap goal of goal
// bytes: from settleMin on. The goal bounds what a collection can give
// back, as the heap does not grow far past it before the runtime
// collects on its own; and by default the goal is never below 4 MiB, so
// below settleMin there are at most a few MiB to give back. There the
// two collections (their page faults included) cost 7 ms of CPU, a tenth
// of the start of a watch of 1,000 records of 200 B, whose goal was 4–5
// MiB, and gave nothing back.
func settles(goal uint64) bool { return goal >= settleMin }

// settleMin is the smallest heap goal under which settle collects.
const settleMin = 8 << 20

// resumed marks the first full batch after Resume as CauseResume.
func (r *run) resumed(b *flow.Batch) {
	if r.resuming && b.Full() {
		b.Cause, r.resuming = flow.CauseResume, false
	}
}

// keep keeps ev for record.
func (r *run) keep(ev flow.Event) {
	if ev.Type == flow.BatchDone {
		r.ended, r.endedRev = true, ev.Rev
		return
	}
	r.recording = append(r.recording, ev)
}

// record records, with State, the events printed since the last record,
// once they are flushed: those of a batch that ended, or, when --count
// stops a batch halfway, those that were printed.
func (r *run) record() error {
	if r.o.State == nil || (!r.ended && len(r.recording) == 0) {
		return nil
	}
	rev := r.endedRev
	if !r.ended {
		for _, ev := range r.recording {
			rev = max(rev, ev.Rev)
		}
	}
	err := r.o.State.Record(r.batchBase+r.res.Batches, rev, r.recording)
	clear(r.recording)
	r.recording, r.ended = r.recording[:0], false
	return err
}

// print prints ev, counts it, and returns errGoalMet once --count is met.
func (r *run) print(ev flow.Event) error {
	if ev.Type == flow.BatchDone {
		r.res.Batches++
		r.batches.Add(1)
		ev.Batch = r.batchBase + r.res.Batches // number what is printed (--changes-only)
	} else {
		r.res.Events++
		r.events.Add(1)
	}
	if err := r.enc.Encode(ev); err != nil {
		return err
	}
	if r.o.Heartbeat > 0 {
		r.lastPrint = time.Now()
	}
	if r.o.Count > 0 && r.res.Events >= r.o.Count {
		return errGoalMet
	}
	return nil
}

// list is the run of --once over a Lister: it prints the initial state
// page by page, as the follower would print it whole, and ends with its
// batch_done. Each page goes through a follower of its own, so that
// nothing of an earlier page is kept.
func (r *run) list(l Lister) (Result, error) {
	silent := r.o.ChangesOnly
	var (
		counts flow.Counts
		last   string
		pages  int
	)
	listed := 0
	rev, err := l.List(r.ctx, func(page []flow.Change) error {
		r.res.Received = true
		r.received.Store(true)
		if r.o.Progress != nil {
			listed += len(page)
			r.o.Progress.Listed(listed)
		}
		// The pages' events must come out as one sorted listing: Listed
		// checks the order within a page, this across pages.
		if len(page) > 0 {
			if pages > 0 && page[0].ID <= last {
				return fmt.Errorf("listing out of order: %q after %q", page[0].ID, last)
			}
			last = page[len(page)-1].ID
			pages++
		}
		n, err := r.fol.Listed(page, func(ev flow.Event) error {
			if silent {
				return nil
			}
			return r.print(ev)
		})
		counts.New += n
		return err
	})
	if r.o.Progress != nil {
		r.o.Progress.Done()
	}
	if err == nil && !silent {
		err = r.print(flow.Event{Type: flow.BatchDone, Synced: true, Cause: flow.CauseInitial, Counts: counts, Rev: rev})
	}
	if err != nil && !errors.Is(err, errGoalMet) {
		r.enc.Flush()
		return r.end(err)
	}
	return r.goalMet()
}

// goalMet ends the run with its goal met, once what was printed is out.
func (r *run) goalMet() (Result, error) {
	if err := r.enc.Flush(); err != nil {
		return r.end(err)
	}
	r.res.Stop = GoalMet
	return r.res, nil
}

// end turns the reason the run stops into its Result, with a Report when
// a goal was set and not met.
func (r *run) end(err error) (Result, error) {
	res, err := r.stop(r.res, err)
	if r.o.hasGoal() && r.res.Received && (res.Stop == TimedOut || res.Stop == Interrupted) {
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

// filterFunc, equalsFunc and untilMet apply the user's jq programs with
// the Strict policy, under the run's context.

func (r *run) filterFunc() func(id string, obj any) (bool, error) {
	if r.o.Filter == nil {
		return nil
	}
	return func(id string, obj any) (bool, error) {
		ok, err := r.o.Filter.TruthyDoc(r.ctx, obj)
		return ok, r.evalError(id, err)
	}
}

func (r *run) equalsFunc() func(id string, a, b any) (bool, error) {
	if r.o.Equals == nil && r.o.EqualsField != "" {
		field := r.o.EqualsField
		return func(id string, a, b any) (bool, error) {
			da, aok := a.(*jsondoc.Doc)
			db, bok := b.(*jsondoc.Doc)
			if !aok || !bok {
				return reflect.DeepEqual(a, b), nil
			}
			return jsondoc.SameField(da, db, field), nil
		}
	}
	if r.o.Equals == nil {
		return nil
	}
	return func(id string, a, b any) (bool, error) {
		eq, err := r.o.Equals.EqualDoc(r.ctx, a, b)
		return eq, r.evalError(id, err) // on error eq is false: print the change
	}
}

// evalError applies Strict to an evaluation error on the object with the
// given id ("" for the whole view). An evaluation cut short because the
// run ends is no warning: it ends the evaluation.
func (r *run) evalError(id string, err error) error {
	if err == nil {
		return nil
	}
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	if r.o.Strict {
		return err // the follower adds the id
	}
	r.warn.warn(id, err.Error())
	return nil
}
