package watch

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nodewatch/nodewatch/internal/backoff"
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handoff"
	"github.com/nodewatch/nodewatch/internal/stream"
)

// A run with Exec hands batches to one handler at a time. While it runs,
// or waits to be retried, the follower goes on applying what the source
// sends, and the run keeps, for each id that changed, the state the
// handler was last given (undelivered). The next run of the handler gets
// the difference between those states and the view now: the latest
// state per id, deletions kept, an object that came and went not at all.
// So a slow handler never works through stale states, and memory is
// bounded by the ids, whatever the rate of changes.

// DefaultExecBackoffMax caps the wait before a failed handler runs
// again; the first wait is about backoff.Initial, then it doubles.
const DefaultExecBackoffMax = 30 * time.Second

// undelivered is what the handler has not been given yet.
type undelivered struct {
	// before holds, for each id changed since the last delivery, its
	// state as delivered then.
	before map[string]delivered
	cause  flow.Cause // of the batches merged: see merge
	synced bool
	rev    int64
	// changes counts the events noted, for Settle to tell a batch that
	// changed something.
	changes int
	// rendered: Render was delivered a view (the first delivery renders
	// whatever the view holds).
	rendered bool
	input    bytes.Buffer
	enc      *stream.Encoder // into input
}

// delivered is the state of an id that a handler was last given.
type delivered struct {
	obj any   // the object, if had
	had bool  // the handler had the id
	rev int64 // the revision of the id's latest change since
	// again: given to a handler that failed, or in flight when an
	// earlier run was killed (resume), so it may have taken a state that
	// obj is not: delivered again whatever the state now, a deletion
	// with prev given where neither obj nor the view has the id.
	again bool
	given any
}

// execLoop is the reader of the batches with Exec or Render.
func (r *run) execLoop(q *handoff.Queue) (Result, error) {
	u := &r.undelivered
	u.before = map[string]delivered{}
	opts := r.o.Output
	opts.Format, opts.FlushEachLine, opts.Color = stream.JSON, false, false
	u.enc = stream.NewEncoder(&u.input, opts)
	r.settler.Settle = r.o.Settle
	for {
		b, err := r.nextBefore(q, earliest(r.settler.due(), r.stable.due()))
		full := false
		switch {
		case errors.Is(err, errDue):
			if r.stable.held(time.Now()) {
				return r.goalMet()
			}
			// Else the changes settled: deliver them.
		case err == nil && r.ctx.Err() == nil:
			full = b.Full()
			if err := r.take(q, b); err != nil {
				return r.end(err)
			}
		default:
			if err == nil {
				err = r.ctx.Err() // queued batches wait in vain once the run has to end
			}
			return r.end(err)
		}
		if len(r.tripped) == 0 && r.settler.waits(time.Now()) {
			continue
		}
		n, err := r.deliverRetrying(q)
		if err != nil {
			return r.end(err)
		}
		r.settler.delivered()
		if len(r.tripped) > 0 {
			return r.failed()
		}
		if u.synced {
			r.hint(r.fol.Set().Len() == 0)
		}
		if r.fol.Set().Len() > 0 {
			r.everSeen = true
		}
		switch {
		case r.o.Once && u.synced,
			r.o.Count > 0 && r.res.Events >= r.o.Count:
			return r.goalMet()
		case n == 0 && !full:
			continue
		}
		if done, err := r.goalHeld(true, true); err != nil || done {
			return r.endGoal(err)
		}
	}
}

// take applies b, and every batch queued behind it, to what is
// undelivered, and notes the time of a change for Settle.
func (r *run) take(q *handoff.Queue, b flow.Batch) error {
	r.res.Received = true
	r.received.Store(true)
	changes := r.undelivered.changes
	err := r.collect(b)
	if err == nil {
		settle(&b)
		err = r.drain(q)
	}
	if r.undelivered.changes != changes {
		r.settler.changed(time.Now())
	}
	return err
}

// collect applies b to the view, and notes for each id it changes the
// state the handler had. The initial state that --changes-only keeps
// silent counts as delivered: it is recorded at once.
func (r *run) collect(b flow.Batch) error {
	r.resumed(&b)
	u := &r.undelivered
	silent := r.o.ChangesOnly && b.Cause == flow.CauseInitial
	err := r.follow(b, func(ev flow.Event) error {
		if silent && r.o.State != nil {
			r.keep(ev)
		}
		switch {
		case ev.Type == flow.BatchDone:
			u.synced, u.rev = ev.Synced, max(u.rev, ev.Rev)
			return nil
		case silent:
			return nil
		}
		u.changes++
		d, ok := u.before[ev.ID]
		if !ok {
			d = delivered{obj: ev.Prev, had: ev.Type != flow.New}
		}
		d.rev = ev.Rev
		if given, again := r.again[ev.ID]; again && b.Cause == flow.CauseResume {
			d.again, d.given = true, given
		}
		u.before[ev.ID] = d
		return nil
	})
	if err != nil {
		return err
	}
	if b.Cause == flow.CauseResume {
		r.again = nil // noted in before
	}
	if silent {
		return r.record()
	}
	u.merge(b.Cause)
	return nil
}

// merge notes the cause of one more batch in what is undelivered: a
// first state (initial, resume) stays what it is, a resync outweighs
// changes.
func (u *undelivered) merge(c flow.Cause) {
	if c != flow.CauseChange && (u.cause == flow.CauseChange || u.cause == flow.CauseResync) {
		u.cause = c
	}
}

// drain applies every batch queued now, without waiting.
func (r *run) drain(q *handoff.Queue) error {
	now, cancel := context.WithCancel(r.ctx)
	cancel()
	for {
		b, err := q.Next(now)
		if err != nil {
			return nil // nothing queued, or closed: the next Next says which
		}
		if err := r.collect(b); err != nil {
			return err
		}
	}
}

// deliverRetrying delivers what is undelivered, retrying a failed
// handler with backoff; every retry gets what merged since too. It
// returns the number of events delivered.
func (r *run) deliverRetrying(q *handoff.Queue) (int, error) {
	bo := backoff.Backoff{Max: cmp.Or(r.o.ExecBackoffMax, DefaultExecBackoffMax)}
	for attempt := 1; ; attempt++ {
		n, err := r.deliver(attempt)
		if err == nil || r.ctx.Err() != nil || errors.As(err, new(stateError)) || errors.As(err, new(Final)) {
			return n, err
		}
		batch := r.batchBase + r.res.Batches + 1
		if attempt > r.o.ExecRetries {
			return 0, fmt.Errorf("%s of batch %d failed %d times, the last time: %w", r.deliveryName(), batch, attempt, err)
		}
		wait := bo.Next()
		if r.o.Logf != nil {
			r.o.Logf("%s of batch %d failed (%v); retry %d of %d in %v", r.deliveryName(), batch, err, attempt, r.o.ExecRetries, wait.Round(time.Millisecond))
		}
		if err := backoff.Sleep(r.ctx, wait); err != nil {
			return 0, err
		}
		if err := r.drain(q); err != nil {
			return 0, err
		}
	}
}

// deliveryName names what delivers a batch, in messages.
func (r *run) deliveryName() string {
	if r.o.Render != nil {
		return "--render: the rendering"
	}
	return "--exec: the handler"
}

// deliver runs the handler once over the difference between what it was
// given and the view now, if there is any, and records the delivery. It
// returns the number of events delivered.
func (r *run) deliver(attempt int) (int, error) {
	u := &r.undelivered
	var events []flow.Event
	var counts flow.Counts
	set := r.fol.Set()
	for _, id := range slices.Sorted(maps.Keys(u.before)) {
		d := u.before[id]
		cur, has := set.Get(id)
		var ev flow.Event
		switch {
		case !d.had && !has && !d.again:
			continue
		case !d.had && !has:
			ev = flow.Event{Type: flow.Deleted, ID: id, Prev: d.given, Rev: d.rev}
			counts.Deleted++
		case !d.had:
			ev = flow.Event{Type: flow.New, ID: id, Object: cur, Rev: d.rev}
			counts.New++
		case !has:
			ev = flow.Event{Type: flow.Deleted, ID: id, Prev: d.obj, Rev: d.rev}
			counts.Deleted++
		default:
			eq, err := r.fol.Equal(id, d.obj, cur)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", id, err)
			}
			if eq && !d.again {
				continue
			}
			ev = flow.Event{Type: flow.Updated, ID: id, Object: cur, Prev: d.obj, Rev: d.rev}
			counts.Updated++
		}
		events = append(events, ev)
	}
	if len(events) == 0 && (r.o.Render == nil || u.rendered) {
		u.delivered()
		return 0, nil
	}
	if r.o.Render != nil {
		return r.render(events, attempt)
	}
	done := flow.Event{Type: flow.BatchDone, Batch: r.batchBase + r.res.Batches + 1, Synced: u.synced, Cause: u.cause, Counts: counts, Rev: u.rev}
	u.input.Reset()
	for _, ev := range append(events, done) {
		if err := u.enc.Encode(ev); err != nil {
			return 0, err
		}
	}
	if err := u.enc.Flush(); err != nil {
		return 0, err
	}
	if r.o.State != nil {
		if err := r.o.State.MarkInFlight(events); err != nil {
			return 0, stateError{err}
		}
	}
	if err := r.o.Exec(r.ctx, u.input.Bytes(), done, attempt); err != nil {
		u.failed(events)
		return 0, err
	}
	r.res.Batches++
	r.batches.Add(1)
	r.res.Events += len(events)
	r.events.Add(int64(len(events)))
	if r.o.State != nil {
		if err := r.o.State.Record(done.Batch, done.Rev, events); err != nil {
			return 0, stateError{err}
		}
	}
	u.delivered()
	return len(events), nil
}

// render delivers the view to Render, for events (perhaps none: the
// first rendering).
func (r *run) render(events []flow.Event, attempt int) (int, error) {
	if err := r.o.Render(r.ctx, r.view(), attempt); err != nil {
		return 0, err
	}
	r.res.Batches++
	r.batches.Add(1)
	r.res.Events += len(events)
	r.events.Add(int64(len(events)))
	r.undelivered.rendered = true
	r.undelivered.delivered()
	return len(events), nil
}

// failed notes that a handler that failed was given events: it may have
// taken any of them, so the next run of the handler gets each id again,
// even where it came and went or went back meanwhile.
func (u *undelivered) failed(events []flow.Event) {
	for _, ev := range events {
		d := u.before[ev.ID]
		d.again, d.given = true, ev.Object
		if ev.Type == flow.Deleted {
			d.given = ev.Prev
		}
		u.before[ev.ID] = d
	}
}

// Final is an error of Exec or Render that a retry cannot mend: the run
// ends with it at once (exit 1).
type Final struct{ Err error }

func (f Final) Error() string { return f.Err.Error() }
func (f Final) Unwrap() error { return f.Err }

// stateError is a --state file's failure while delivering: not the
// handler's, so not retried.
type stateError struct{ error }

func (e stateError) Unwrap() error { return e.error }

// delivered forgets what was just delivered.
func (u *undelivered) delivered() {
	clear(u.before)
	u.cause = flow.CauseChange
}
