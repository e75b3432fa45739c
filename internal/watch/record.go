package watch

import (
	"errors"
	"slices"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// resume starts the run from what an earlier one delivered: the
// recorded view, then what it had in flight, as the consumer may hold
// it; the ids in flight are delivered again, all of them, in the first
// full batch (view.Follower.Redeliver), which has cause resume.
func (r *run) resume(res *Resume) {
	view := res.View
	again := make(map[string]any, len(res.InFlight))
	if len(res.InFlight) > 0 {
		byID := make(map[string]int, len(view))
		for i, c := range view {
			byID[c.ID] = i
		}
		view = slices.Clone(view)
		for _, ev := range res.InFlight {
			i, ok := byID[ev.ID]
			switch {
			case ev.Type == flow.Deleted:
				again[ev.ID] = ev.Prev
				if ok {
					view[i].Deleted = true
				}
			case ok:
				view[i].Object = ev.Object
			default:
				view = append(view, flow.Change{ID: ev.ID, Object: ev.Object, Rev: ev.Rev})
			}
			if ev.Type != flow.Deleted {
				again[ev.ID] = nil
			}
		}
		view = slices.DeleteFunc(view, func(c flow.Change) bool { return c.Deleted })
	}
	r.fol.Load(view)
	r.fol.Redeliver(again)
	r.again = again
	r.resuming, r.batchBase = true, res.Batch
}

// resumed marks the first full batch after Resume as CauseResume.
func (r *run) resumed(b *flow.Batch) {
	if r.resuming && b.Full() {
		b.Cause, r.resuming = flow.CauseResume, false
	}
}

// applyRecorded is apply with State: the batch's events are kept, noted
// in flight, and only then printed, so that a run killed once any of its
// lines may be out delivers them again when it resumes.
func (r *run) applyRecorded(b flow.Batch, silent bool) (changed bool, err error) {
	from := len(r.recording)
	var done flow.Event
	err = r.follow(b, func(ev flow.Event) error {
		changed = true
		if ev.Type == flow.BatchDone {
			done = ev
		}
		r.keep(ev)
		return nil
	})
	if err != nil || silent || !changed {
		return changed, err
	}
	if err := r.o.State.MarkInFlight(r.recording[from:]); err != nil {
		return changed, err
	}
	for i, ev := range r.recording[from:] {
		if err := r.print(ev); err != nil {
			if errors.Is(err, errGoalMet) {
				// What --count did not print is not delivered.
				clear(r.recording[from+i+1:])
				r.recording, r.ended = r.recording[:from+i+1], false
			}
			return changed, err
		}
	}
	return changed, r.print(done)
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
