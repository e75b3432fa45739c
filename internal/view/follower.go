package view

import (
	"github.com/nodewatch/nodewatch/internal/flow"

	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// Follower turns batches into events: it remembers what it printed and
// prints what differs. Filter and Equals are the user's jq expressions.
//
// A Follower is driven by one goroutine; it is not safe for concurrent use.
type Follower struct {
	// Filter reports whether the object with the given id is of
	// interest. Nil means all are. An error stops Apply and is returned
	// from it.
	Filter func(id string, obj any) (bool, error)
	// Equals reports whether two states of one id are the same for the
	// user, so that no Updated is printed. Nil compares *jsondoc.Doc
	// objects by their JSON, others with reflect.DeepEqual.
	// An error stops Apply and is returned from it.
	Equals func(id string, a, b any) (bool, error)
	// Recycle: once a batch is applied, Apply frees (jsondoc.Free) the
	// objects that it took out of the view or kept out of it: those it
	// replaced, deleted, or found equal or not of interest. Only for an
	// emit that keeps nothing of an event past its call, over sources
	// that keep nothing of what they hand on (jsondoc.Doc.Give), or
	// count their own hold (jsondoc.Doc.Share).
	Recycle bool

	set     *Set
	again   map[string]any // Redeliver's: id → prev for a deletion
	full    bool           // Apply's: its batch is full (again applies)
	batches int
	synced  bool
	scratch []flow.Change // Apply's, between batches empty
	order   []int32       // Apply's, positions in a batch
	leading []leading     // Apply's, sortByID's
	dead    []any         // Apply's, with Recycle: the objects it frees
}

// NewFollower returns a Follower with an empty set.
func NewFollower(filter func(id string, obj any) (bool, error), equals func(id string, a, b any) (bool, error)) *Follower {
	return &Follower{Filter: filter, Equals: equals, set: NewSet()}
}

// Load puts the objects of view into the set, as if they had been
// printed: a run that resumes a recorded view starts from it.
func (f *Follower) Load(view []flow.Change) {
	for _, c := range view {
		f.set.Put(c.ID, c.Object)
	}
}

// Redeliver makes the next full batch emit an event for each id of
// again, even where the view holds the state that batch lists: an
// updated (prev the view's object) where both hold the id, and where
// neither does, a deleted with prev again[id] (nil if unknown). The
// other cases (the id came or went) emit as always. A run that resumes
// a batch that was in flight when an earlier run was killed gives its
// ids again so: the consumer may not have taken them, and may have
// taken states that the recorded view does not hold.
func (f *Follower) Redeliver(again map[string]any) { f.again = again }

// Set returns the objects printed so far (the current view). The caller
// must not modify it.
func (f *Follower) Set() *Set { return f.set }

// Apply compares b with the current view and calls emit for each
// resulting event in ascending id order, then once with flow.BatchDone.
//
// A flow.CauseChange batch that changes nothing prints nothing at all, not even
// BatchDone: an identical re-put is not news. Initial and resync batches
// always end in flow.BatchDone, so scripts learn that the view is complete.
//
// Changes to one id within b coalesce: the last one wins. The cost is
// O(k log k) for k changes; a full batch also walks the set of n, to find
// the ids that vanished, and sorts them in: O(n + (k+d) log(k+d)) for d
// of them. emit must not call Apply: the changes are in f's scratch.
func (f *Follower) Apply(b flow.Batch, emit func(flow.Event) error) error {
	cs := f.latest(b)
	defer f.release()
	f.full = b.Full()
	var counts flow.Counts
	for _, c := range cs {
		ev, err := f.step(c)
		if err != nil {
			return err
		}
		switch ev.Type {
		case 0:
			continue
		case flow.New:
			counts.New++
		case flow.Updated:
			counts.Updated++
		case flow.Deleted:
			counts.Deleted++
		}
		if err := emit(ev); err != nil {
			return err
		}
	}
	f.synced = f.synced || b.Synced
	if b.Full() {
		f.again = nil
	}
	if !b.Full() && counts == (flow.Counts{}) {
		f.free()
		return nil
	}
	f.batches++
	if err := emit(flow.Event{Type: flow.BatchDone, Batch: f.batches, Synced: f.synced, Cause: b.Cause, Counts: counts, Rev: b.Rev}); err != nil {
		return err
	}
	f.free()
	return nil
}

// same reports whether a and b are the same Doc (not equal ones).
func same(a, b any) bool {
	da, ok := a.(*jsondoc.Doc)
	db, ok2 := b.(*jsondoc.Doc)
	return ok && ok2 && da == db
}

// free frees the objects that Apply took out of the view or kept out of
// it (Recycle).
func (f *Follower) free() {
	for i, o := range f.dead {
		jsondoc.Free(o)
		f.dead[i] = nil
	}
	f.dead = f.dead[:0]
}

// maxScratch is the most changes the scratch of Apply keeps between
// batches; a larger batch (a listing) lets its scratch go.
const maxScratch = 4096

// latest returns b's changes in ascending id order, one per id: the last
// of an id's changes, but an Undecodable change never replaces an earlier
// one (the earlier state is the last to show); for a full batch, also a
// deletion of each id in the view that b lacks. The slice is f's scratch,
// valid until release.
func (f *Follower) latest(b flow.Batch) []flow.Change {
	cs := b.Changes
	// Positions, sorted by id when they do not come so; an id's changes
	// keep their order.
	order := f.order[:0]
	for i := range cs {
		order = append(order, int32(i))
	}
	if !slices.IsSortedFunc(cs, byID) {
		f.leading = sortByID(cs, order, f.leading)
	}
	f.order = order
	out := f.scratch[:0]
	for i := 0; i < len(order); {
		last := &cs[order[i]]
		j := i + 1
		for ; j < len(order) && cs[order[j]].ID == last.ID; j++ {
			if c := &cs[order[j]]; !c.Undecodable {
				last = c
			}
		}
		out = append(out, *last)
		i = j
	}
	if b.Full() {
		// Whatever is printed but missing from a full listing is gone.
		n, k := len(out), 0
		f.set.Ascend(func(id string, _ any) bool {
			for k < n && out[k].ID < id {
				k++
			}
			if k == n || out[k].ID != id {
				out = append(out, flow.Change{ID: id, Deleted: true, Rev: b.Rev})
			}
			return true
		})
		// And so is an id to deliver again that neither holds.
		for id := range f.again {
			_, listed := slices.BinarySearchFunc(out[:n], id, func(c flow.Change, id string) int { return strings.Compare(c.ID, id) })
			if _, held := f.set.Get(id); !held && !listed {
				out = append(out, flow.Change{ID: id, Deleted: true, Rev: b.Rev})
			}
		}
		if len(out) > n {
			slices.SortFunc(out, byID)
		}
	}
	f.scratch = out
	return out
}

func byID(a, b flow.Change) int { return strings.Compare(a.ID, b.ID) }

// release lets go of the objects in Apply's scratch, and of the scratch
// itself when a listing made it large.
func (f *Follower) release() {
	// What an Apply that failed did not free, it lets go of (the run
	// ends): an event that was not printed may hold it.
	clear(f.dead)
	f.dead = f.dead[:0]
	if cap(f.dead) > maxScratch {
		f.dead = nil
	}
	if cap(f.scratch) > maxScratch || cap(f.order) > maxScratch || cap(f.leading) > maxScratch {
		f.scratch, f.order, f.leading = nil, nil, nil
		return
	}
	clear(f.scratch)
}

// Listed emits what Apply would emit, but flow.BatchDone, for page as the
// whole initial batch of a Follower with an empty view: New for each
// object that Filter keeps, in page's order. It keeps no view, and needs
// no map and no sort: page must be a page of a listing, its ids strictly
// ascending (an error otherwise). It returns the number of events.
// `key --once` prints a listing this way, page by page.
func (f *Follower) Listed(page []flow.Change, emit func(flow.Event) error) (int, error) {
	n := 0
	for i, c := range page {
		if i > 0 && c.ID <= page[i-1].ID {
			return n, fmt.Errorf("listing out of order: %q after %q", c.ID, page[i-1].ID)
		}
		if c.Undecodable || c.Deleted {
			continue
		}
		if f.Filter != nil {
			ok, err := f.Filter(c.ID, c.Object)
			if err != nil {
				return n, fmt.Errorf("%q: %w", c.ID, err)
			}
			if !ok {
				continue
			}
		}
		if err := emit(flow.Event{Type: flow.New, ID: c.ID, Object: c.Object, Rev: c.Rev}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// step applies one change to the set and returns the event it causes; an
// flow.Event with a zero Type means none. With Recycle, it notes the objects
// that the view lets go of, for Apply to free once the batch is emitted.
func (f *Follower) step(c flow.Change) (flow.Event, error) {
	if c.Undecodable {
		return flow.Event{}, nil
	}
	// One lookup serves the whole step: an update replaces the object
	// in its entry.
	e, had := f.set.lookup(c.ID)
	var prev any
	if had {
		prev = e.obj
	}
	keep := !c.Deleted
	if keep && f.Filter != nil && !c.Kept {
		ok, err := f.Filter(c.ID, c.Object)
		if err != nil {
			return flow.Event{}, fmt.Errorf("%q: %w", c.ID, err)
		}
		keep = ok
	}
	again, deliverAgain := f.again[c.ID]
	deliverAgain = deliverAgain && f.full
	switch {
	case !keep && had:
		f.set.Delete(c.ID)
		f.bury(c.Object, prev)
		f.bury(prev, nil)
		return flow.Event{Type: flow.Deleted, ID: c.ID, Prev: prev, Rev: c.Rev}, nil
	case !keep && deliverAgain:
		f.bury(c.Object, nil)
		return flow.Event{Type: flow.Deleted, ID: c.ID, Prev: again, Rev: c.Rev}, nil
	case !keep:
		f.bury(c.Object, nil)
		return flow.Event{}, nil
	case !had:
		f.set.Put(c.ID, c.Object)
		return flow.Event{Type: flow.New, ID: c.ID, Object: c.Object, Rev: c.Rev}, nil
	}
	eq, err := f.Equal(c.ID, prev, c.Object)
	if err != nil {
		return flow.Event{}, fmt.Errorf("%q: %w", c.ID, err)
	}
	if eq && !deliverAgain {
		// Keep what was printed, so that Prev is always a state the
		// user has seen.
		f.bury(c.Object, prev)
		return flow.Event{}, nil
	}
	e.obj = c.Object
	f.bury(prev, c.Object)
	return flow.Event{Type: flow.Updated, ID: c.ID, Object: c.Object, Prev: prev, Rev: c.Rev}, nil
}

// bury notes, with Recycle, an object o that the view let go of, unless
// it is kept, the same Doc as o: a source may hand on the object that the
// view holds, and an --equals may find the view's own object changed.
func (f *Follower) bury(o, kept any) {
	if f.Recycle && o != nil && !same(o, kept) {
		f.dead = append(f.dead, o)
	}
}

// Equal reports whether a and b, two states of id, are the same for the
// user: by Equals, or, without it, as the follower compares them.
func (f *Follower) Equal(id string, a, b any) (bool, error) {
	if f.Equals == nil {
		da, aok := a.(*jsondoc.Doc)
		db, bok := b.(*jsondoc.Doc)
		if aok && bok {
			return da.Equal(db), nil
		}
		return reflect.DeepEqual(a, b), nil
	}
	return f.Equals(id, a, b)
}
