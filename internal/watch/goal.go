package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// MaxUnmet is how many objects that do not meet Each a Report names.
const MaxUnmet = 20

// Report says how far a run got toward its goal, when it ended without
// meeting it (a timeout, an interrupt, the source gone): what a failed
// CI wait needs to say why.
type Report struct {
	// Objects is how many objects the view held at the end (those that
	// pass Filter).
	Objects int `json:"objects"`
	// Meeting is how many of them satisfy Each (nil without Each), and
	// Unmet the first MaxUnmet that do not, in id order; MoreUnmet counts
	// the rest.
	Meeting   *int    `json:"meeting,omitempty"`
	Unmet     []Unmet `json:"unmet,omitempty"`
	MoreUnmet int     `json:"more_unmet,omitempty"`
	// EverSeen says, for a view of one object (not List), whether it was
	// ever there.
	EverSeen *bool `json:"ever_seen,omitempty"`
	// UntilValue is Until's first output over the view at the end (with
	// Until), or UntilError why it has none.
	UntilValue any    `json:"until_value,omitempty"`
	UntilError string `json:"until_error,omitempty"`
	// Tripped names the objects that met FailIf (the first MaxUnmet),
	// MoreTripped counts the rest.
	Tripped     []Unmet `json:"tripped,omitempty"`
	MoreTripped int     `json:"more_tripped,omitempty"`
	// With Stable: HeldFor is how long the goal has held (Holding), or
	// held the last time before it broke ("" if it never held).
	HeldFor string `json:"held_for,omitempty"`
	Holding bool   `json:"holding,omitempty"`
	// Events and Batches are what was printed.
	Events  int `json:"events"`
	Batches int `json:"batches"`
}

// Unmet is an object that does not satisfy Each: its id and what a person
// reads of it (Output.Summary, or its JSON).
type Unmet struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
}

// view is the current objects as Until sees them: an array in id order
// (List), or the one object, or null.
func (r *run) view() any {
	set := r.fol.Set()
	if !r.o.List {
		var one any
		set.Ascend(func(_ string, obj any) bool {
			one = jsondoc.TreeOf(obj)
			return false
		})
		return one
	}
	objs := make([]any, 0, set.Len())
	set.Ascend(func(_ string, obj any) bool {
		objs = append(objs, jsondoc.TreeOf(obj))
		return true
	})
	return objs
}

// conditionMet reports whether Until (when until is true) or Each (when
// each is true) holds, as far as they are set, and whether either was
// evaluated. Until is evaluated first; when it holds, Each is not
// evaluated.
func (r *run) conditionMet(until, each bool) (met, evaluated bool, err error) {
	if until && r.o.Until != nil {
		if met, err := r.untilMet(); err != nil || met {
			return met, true, err
		}
		evaluated = true
	}
	if each && r.o.Each != nil {
		met, err := r.eachMet()
		return met, true, err
	}
	return false, evaluated, nil
}

// goalHeld evaluates the goal after a batch (see conditionMet) and
// reports whether the run ends with it: at once, or, with Stable, once
// it has held that long (the loops wait for that moment too).
func (r *run) goalHeld(until, each bool) (bool, error) {
	met, evaluated, err := r.conditionMet(until, each)
	if err != nil || !evaluated {
		return false, err
	}
	return r.stable.observe(time.Now(), met), nil
}

// untilMet evaluates Until over the view.
func (r *run) untilMet() (bool, error) {
	ok, err := r.o.Until.Truthy(r.ctx, r.view())
	return ok, r.evalError("", r.untilError(err))
}

// eachMet reports whether every object (at least one), or at least
// AtLeast of them, satisfy Each.
func (r *run) eachMet() (bool, error) {
	meeting, total, err := r.count(r.ctx, true, nil)
	if err != nil {
		return false, err
	}
	if r.o.AtLeast > 0 {
		return meeting >= r.o.AtLeast, nil
	}
	return total > 0 && meeting == total, nil
}

// count counts the objects that satisfy Each, and calls unmet (if set)
// with each that does not. An evaluation error counts as not satisfied;
// with warn, it is also a warning, or with Strict the error returned.
func (r *run) count(ctx context.Context, warn bool, unmet func(id string, obj any)) (meeting, total int, err error) {
	r.fol.Set().Ascend(func(id string, obj any) bool {
		total++
		ok, evalErr := r.o.Each.Truthy(ctx, jsondoc.TreeOf(obj))
		if evalErr != nil && warn {
			if err = r.evalError(id, evalErr); err != nil {
				return false
			}
		}
		if ok {
			meeting++
		} else if unmet != nil {
			unmet(id, obj)
		}
		return true
	})
	return meeting, total, err
}

// report is the Report of a run that ends without its goal. The run's
// context has ended: the programs run under a context of their own
// (bounded by their time limit).
func (r *run) report() *Report {
	rep := &Report{Objects: r.fol.Set().Len(), Events: r.res.Events, Batches: r.res.Batches,
		Tripped: r.tripped, MoreTripped: r.moreTripped}
	if held, holding := r.stable.heldFor(time.Now()); r.o.Stable > 0 && held > 0 {
		rep.HeldFor, rep.Holding = held.Round(time.Millisecond).String(), holding
	}
	ctx := context.Background()
	if r.o.Each != nil {
		meeting, _, _ := r.count(ctx, false, func(id string, obj any) {
			if len(rep.Unmet) == MaxUnmet {
				rep.MoreUnmet++
				return
			}
			rep.Unmet = append(rep.Unmet, Unmet{ID: id, Summary: r.summary(obj)})
		})
		rep.Meeting = &meeting
	}
	if !r.o.List {
		seen := r.everSeen
		rep.EverSeen = &seen
	}
	if r.o.Until != nil {
		out, err := r.o.Until.Run(ctx, r.view())
		switch {
		case err != nil:
			rep.UntilError = r.untilError(err).Error()
		case len(out) == 0:
			rep.UntilError = "no output"
		default:
			rep.UntilValue = out[0]
		}
	}
	return rep
}

// summary is what a Report says of obj.
func (r *run) summary(obj any) string {
	if r.o.Output.Summary != nil {
		if s := r.o.Output.Summary(obj); s != "" {
			return s
		}
	}
	if d, ok := obj.(*jsondoc.Doc); ok {
		return string(d.JSON())
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

// Lines tell r to a person, a line each, for a run with options o; what
// names the object of a view of one ("key /a").
func (r *Report) Lines(o Options, what string) []string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	switch {
	case o.List && r.Objects == 1:
		add("1 object")
	case o.List:
		add("%d objects", r.Objects)
	case !*r.EverSeen:
		add("%s was never seen", what)
	case r.Objects == 0:
		add("%s was seen, and is gone", what)
	default:
		add("%s is there", what)
	}
	if o.Count > 0 {
		add("%d of %d events printed", r.Events, o.Count)
	}
	if r.Meeting != nil {
		want := "all"
		if o.AtLeast > 0 {
			want = fmt.Sprintf("at least %d", o.AtLeast)
		}
		add("%d meet %s (want %s)", *r.Meeting, o.Each.Name(), want)
		for _, u := range r.Unmet {
			add("  not met: %s  %s", u.ID, u.Summary)
		}
		if r.MoreUnmet > 0 {
			add("  and %d more not met", r.MoreUnmet)
		}
	}
	for _, u := range r.Tripped {
		add("met %s: %s  %s", o.FailIf.Name(), u.ID, u.Summary)
	}
	if r.MoreTripped > 0 {
		add("and %d more met %s", r.MoreTripped, o.FailIf.Name())
	}
	switch {
	case o.Stable <= 0:
	case r.Holding:
		add("the goal holds, for %s of --stable %v", r.HeldFor, o.Stable)
	case r.HeldFor != "":
		add("the goal last held for %s (--stable %v)", r.HeldFor, o.Stable)
	default:
		add("the goal never held (--stable %v)", o.Stable)
	}
	switch {
	case o.Until != nil && r.UntilError != "":
		add("%s over the last view: %s", o.Until.Name(), r.UntilError)
	case o.Until != nil:
		v, _ := json.Marshal(r.UntilValue)
		add("%s over the last view: %s", o.Until.Name(), v)
	}
	return lines
}
