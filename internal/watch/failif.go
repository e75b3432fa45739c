package watch

import (
	"github.com/nodewatch/nodewatch/internal/flow"
	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// FailIf is judged on every object that enters the view or changes in
// it, as the follower hands its event on: only those can have begun to
// meet it. A resumed run's first batch is judged over the whole view
// once applied too, since it hands on only what differs from the
// recorded view. The loops end the run (failed) once the batch that
// tripped it is printed or delivered, or --count cut it short.

// follow applies b to the view, handing each event to fn once FailIf
// has judged it, and judges a resumed view whole after.
func (r *run) follow(b flow.Batch, fn func(flow.Event) error) error {
	if r.o.FailIf == nil {
		return r.fol.Apply(b, fn)
	}
	err := r.fol.Apply(b, func(ev flow.Event) error {
		if err := r.trip(ev); err != nil {
			return err
		}
		return fn(ev)
	})
	if err == nil {
		err = r.tripFull(b)
	}
	return err
}

// trip judges ev against FailIf.
func (r *run) trip(ev flow.Event) error {
	if ev.Type != flow.New && ev.Type != flow.Updated {
		return nil
	}
	return r.judge(ev.ID, ev.Object)
}

// tripFull judges the whole view against FailIf after b, a resumed
// run's first batch.
func (r *run) tripFull(b flow.Batch) error {
	if b.Cause != flow.CauseResume {
		return nil
	}
	var err error
	r.fol.Set().Ascend(func(id string, obj any) bool {
		err = r.judge(id, obj)
		return err == nil
	})
	return err
}

// judge notes obj, the state of id, if it meets FailIf. An evaluation
// error is a warning (it does not meet it), or with Strict the error.
func (r *run) judge(id string, obj any) error {
	ok, err := r.o.FailIf.Truthy(r.ctx, jsondoc.TreeOf(obj))
	if err := r.evalError(id, err); err != nil || !ok {
		return err
	}
	if r.trippedIDs == nil {
		r.trippedIDs = map[string]bool{}
	}
	switch {
	case r.trippedIDs[id]:
	case len(r.tripped) == MaxUnmet:
		r.moreTripped++
	default:
		r.tripped = append(r.tripped, Unmet{ID: id, Summary: r.summary(obj)})
	}
	r.trippedIDs[id] = true
	return nil
}
