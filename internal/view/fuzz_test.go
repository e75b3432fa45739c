package view

import (
	"github.com/nodewatch/nodewatch/internal/flow"

	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// FuzzFollower: the follower against a naive recomputation. The fuzzer's
// bytes become batches (full listings and changes, several changes to one
// id in a batch among them) over a few ids; after each batch, the naive
// model recomputes the whole view (the source's objects that pass the
// filter), diffs it against the view before, and the follower must emit
// exactly those events, in id order, then flow.BatchDone with their counts;
// a change batch that changes nothing emits nothing at all. Each batch is
// written over once applied.
func FuzzFollower(f *testing.F) {
	for _, s := range []string{"", "\x00\x01\x02", "\x08\x11\x1a\x00\x23", "\x00\x05\x05\x0d\x0d\x15", "\x08\x0f\x10\x87\x17\x0f\xc0\x0f\x07\x18"} {
		f.Add([]byte(s))
	}
	keep := func(_ string, obj any) (bool, error) { return obj.(int)%3 != 0, nil }
	f.Fuzz(func(t *testing.T, ops []byte) {
		fol := NewFollower(keep, nil)
		source := map[string]int{}  // the model: the source's objects
		printed := map[string]int{} // the model: the view printed so far
		b := flow.Batch{Cause: flow.CauseInitial, Synced: true}
		first := true
		run := func() {
			var got []string
			if err := fol.Apply(b, func(ev flow.Event) error {
				if ev.Type == flow.BatchDone {
					got = append(got, fmt.Sprintf("done %d/%d/%d @%d", ev.Counts.New, ev.Counts.Updated, ev.Counts.Deleted, ev.Rev))
				} else {
					got = append(got, fmt.Sprintf("%v %s %v %v @%d", ev.Type, ev.ID, ev.Object, ev.Prev, ev.Rev))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			// The follower keeps nothing of the batch's slice: `key`'s
			// run gives it back to the hand-off (handoff.Queue.Recycle),
			// which copies a later batch into it.
			applied := slices.Clone(b.Changes)
			for i := range b.Changes {
				b.Changes[i] = flow.Change{ID: "id-0", Object: 1, Rev: -1}
			}
			b.Changes = applied
			// The naive recomputation.
			before := maps.Clone(source)
			if b.Full() {
				clear(source)
				for _, c := range b.Changes {
					if v, ok := before[c.ID]; ok && c.Undecodable {
						source[c.ID] = v // unless a decodable state follows
					}
				}
			}
			// An event carries the revision of the change that made it,
			// the last decodable one of its id; one for an id that a full
			// batch lacks carries the batch's.
			revs := map[string]int64{}
			rev := func(id string) int64 {
				if r, ok := revs[id]; ok {
					return r
				}
				return b.Rev
			}
			for _, c := range b.Changes {
				if c.Undecodable {
					continue
				}
				revs[c.ID] = c.Rev
				if c.Deleted {
					delete(source, c.ID)
				} else {
					source[c.ID] = c.Object.(int)
				}
			}
			view := map[string]int{}
			for id, v := range source {
				if v%3 != 0 {
					view[id] = v
				}
			}
			var want []string
			var counts flow.Counts
			for _, id := range slices.Sorted(maps.Keys(mergeKeys(view, printed))) {
				v, now := view[id]
				p, before := printed[id]
				switch {
				case now && !before:
					counts.New++
					want = append(want, fmt.Sprintf("new %s %v <nil> @%d", id, v, rev(id)))
				case now && v != p:
					counts.Updated++
					want = append(want, fmt.Sprintf("updated %s %v %v @%d", id, v, p, rev(id)))
				case !now && before:
					counts.Deleted++
					want = append(want, fmt.Sprintf("deleted %s <nil> %v @%d", id, p, rev(id)))
				}
			}
			if len(want) > 0 || b.Full() {
				want = append(want, fmt.Sprintf("done %d/%d/%d @%d", counts.New, counts.Updated, counts.Deleted, b.Rev))
			}
			printed = view
			if !slices.Equal(got, want) {
				t.Fatalf("batch %+v:\n got %q\nwant %q", b, got, want)
			}
		}
		for i, op := range ops {
			id := fmt.Sprintf("id-%d", op%5)
			rev := int64(i + 1) // each op its own revision
			switch {
			case op&0xc0 == 0xc0: // end the batch here; the next is full
				b.Rev = rev
				run()
				b = flow.Batch{Cause: flow.CauseResync, Synced: true}
			case op&0xc0 == 0x80: // end the batch here; the next is a change
				if first || len(b.Changes) > 0 || b.Full() {
					b.Rev = rev
					run()
				}
				b = flow.Batch{Cause: flow.CauseChange, Synced: true}
			case op&0x07 == 0x07:
				b.Changes = append(b.Changes, flow.Change{ID: id, Undecodable: true, Rev: rev})
			case op&0x20 != 0:
				b.Changes = append(b.Changes, flow.Change{ID: id, Deleted: true, Rev: rev})
			default:
				b.Changes = append(b.Changes, flow.Change{ID: id, Object: int(op>>3) % 4, Rev: rev})
			}
			first = false
		}
		b.Rev = int64(len(ops) + 1)
		run()
	})
}

// mergeKeys returns a map holding the keys of both.
func mergeKeys(a, b map[string]int) map[string]int {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

// TestListedModel: Listed emits, for random pages of a listing (ids
// ascending, objects undecodable, deleted, kept or not by the filter, a
// filter that fails), what Apply emits for the same page as the initial
// batch of a new Follower, but flow.BatchDone, whose New count it returns.
func TestListedModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for i := range 2000 {
		var page []flow.Change
		id := 0
		for range rng.IntN(40) {
			id += 1 + rng.IntN(3)
			c := flow.Change{ID: fmt.Sprintf("k%04d", id), Object: rng.IntN(100), Rev: int64(rng.IntN(9))}
			switch rng.IntN(10) {
			case 0:
				c.Object, c.Undecodable = nil, true
			case 1:
				c.Object, c.Deleted = nil, true
			}
			page = append(page, c)
		}
		failOn := -1
		if rng.IntN(10) == 0 {
			failOn = rng.IntN(100)
		}
		filter := func(_ string, obj any) (bool, error) {
			if obj.(int) == failOn {
				return false, fmt.Errorf("filter fails on %d", failOn)
			}
			return obj.(int)%3 != 0, nil
		}
		if rng.IntN(5) == 0 {
			filter = nil
		}
		show := func(out *[]string) func(flow.Event) error {
			return func(ev flow.Event) error {
				*out = append(*out, fmt.Sprintf("%v %s %v %v %d", ev.Type, ev.ID, ev.Object, ev.Prev, ev.Rev))
				return nil
			}
		}
		var want, got []string
		var counts flow.Counts
		werr := NewFollower(filter, nil).Apply(flow.Batch{Changes: page, Cause: flow.CauseInitial, Synced: true}, func(ev flow.Event) error {
			if ev.Type == flow.BatchDone {
				counts = ev.Counts
				return nil
			}
			return show(&want)(ev)
		})
		n, gerr := NewFollower(filter, nil).Listed(page, show(&got))
		if (werr == nil) != (gerr == nil) || werr == nil && (!slices.Equal(got, want) || n != counts.New) {
			t.Fatalf("page %d %+v:\nListed %q, %d, %v\nApply  %q, %+v, %v", i, page, got, n, gerr, want, counts, werr)
		}
	}
	// Out of order is an error.
	if _, err := NewFollower(nil, nil).Listed([]flow.Change{{ID: "b", Object: 1}, {ID: "a", Object: 2}}, func(flow.Event) error { return nil }); err == nil {
		t.Fatal("Listed took a page out of order")
	}
}
