package view

import (
	"github.com/nodewatch/nodewatch/internal/flow"

	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"weak"
)

// object is an object the tests can watch being collected: larger than
// the runtime's tiny allocations (16 bytes), which share a block.
type object struct {
	v int
	_ [3]int
}

// TestApplyHoldsNoObjects: after Apply, its scratch holds none of the
// batch's objects, for a batch below maxScratch and one above it: objects
// the filter left out of the view are collected while the Follower lives.
func TestApplyHoldsNoObjects(t *testing.T) {
	for _, n := range []int{50, maxScratch + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := NewFollower(func(_ string, obj any) (bool, error) { return obj.(*object).v%2 == 0, nil }, nil)
			var weaks []weak.Pointer[object]
			b := change()
			for i := range n {
				o := &object{v: 2*i + 1} // odd: never in the view
				weaks = append(weaks, weak.Make(o))
				b.Changes = append(b.Changes, put(fmt.Sprintf("id-%05d", (i*7919)%n), o)) // out of order
			}
			if err := f.Apply(b, func(flow.Event) error { return nil }); err != nil {
				t.Fatal(err)
			}
			b = flow.Batch{}
			runtime.GC()
			for i, w := range weaks {
				if w.Value() != nil {
					t.Fatalf("object %d of %d outlived Apply", i, n)
				}
			}
			runtime.KeepAlive(f)
		})
	}
}

// TestApplyAfterEmitFails: an Apply that emit stopped part way leaves no
// change of its batch behind for the next: the next batch prints what it
// changes in the view, as the events before the failure left it.
func TestApplyAfterEmitFails(t *testing.T) {
	f := NewFollower(nil, nil)
	stop := errors.New("stop")
	var got []string
	emit := func(ev flow.Event) error {
		got = append(got, fmt.Sprintf("%v %s %v", ev.Type, ev.ID, ev.Object))
		if ev.ID == "b" {
			return stop
		}
		return nil
	}
	if err := f.Apply(change(put("c", 3), put("a", 1), put("b", 2)), emit); !errors.Is(err, stop) {
		t.Fatalf("Apply: %v, want the emit's error", err)
	}
	if want := []string{"new a 1", "new b 2"}; !slices.Equal(got, want) {
		t.Fatalf("before the failure: %q, want %q", got, want)
	}
	got = nil
	if err := f.Apply(change(put("d", 4), put("a", 1)), emit); err != nil {
		t.Fatal(err)
	}
	if want := []string{"new d 4", "batch_done  <nil>"}; !slices.Equal(got, want) {
		t.Fatalf("the next batch: %q, want %q", got, want)
	}
}
