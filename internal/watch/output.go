package watch

import (
	"time"

	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/handoff"
)

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

// next waits for the next batch, or returns errDue once a heartbeat is
// due (nothing was printed for Heartbeat) or the goal has held for
// Stable.
func (r *run) next(q *handoff.Queue) (flow.Batch, error) {
	deadline := r.stable.due()
	if r.o.Heartbeat > 0 {
		if r.lastPrint.IsZero() {
			r.lastPrint = time.Now()
		}
		deadline = earliest(deadline, r.lastPrint.Add(r.o.Heartbeat))
	}
	return r.nextBefore(q, deadline)
}

// heartbeat prints a heartbeat, once Heartbeat passed since the last
// line, if the source confirmed within the last Heartbeat that it is
// current; either way, the next is due Heartbeat later.
func (r *run) heartbeat() error {
	now := time.Now()
	if r.o.Heartbeat <= 0 || now.Sub(r.lastPrint) < r.o.Heartbeat {
		return nil
	}
	r.lastPrint = now
	if r.confirmedAt.IsZero() || now.Sub(r.confirmedAt) > r.o.Heartbeat {
		return nil
	}
	if err := r.enc.Encode(flow.Event{Type: flow.Heartbeat, Confirmed: r.o.Confirms, Rev: r.confirmedRev}); err != nil {
		return err
	}
	return r.enc.Flush()
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
