package watch

import "github.com/nodewatch/nodewatch/internal/flow"

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
