package watch

import (
	"runtime"
	"testing"

	"github.com/nodewatch/nodewatch/internal/flow"
)

func numGC() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumGC
}

// settle collects after a full batch only when the heap's goal is
// settleMin or more: below it, the two collections cost more than they
// give back. A heap at the runtime's floor of 4 MiB is not collected.
func TestSettleCollectsOnlyALargeHeap(t *testing.T) {
	full := func() *flow.Batch {
		return &flow.Batch{Cause: flow.CauseInitial, Changes: make([]flow.Change, 1)}
	}

	goal := func() uint64 { g, _ := heapGoal(); return g }
	runtime.GC()
	if g := goal(); g >= 5<<20 { // the runtime's floor, and a little
		t.Skipf("the test process's heap goal is %d bytes: not a small heap", g)
	}
	before := numGC()
	b := full()
	settle(b)
	if n := numGC() - before; n >= 2 {
		t.Errorf("settle collected %d times under a heap goal of %d bytes, below settleMin", n, goal())
	}
	if b.Changes != nil {
		t.Errorf("settle kept the batch's changes")
	}

	live := make([]byte, 2*settleMin) // a large live heap: its goal is above settleMin
	runtime.GC()
	before = numGC()
	b = full()
	settle(b)
	if n := numGC() - before; n < 2 {
		t.Errorf("settle collected %d times under a heap goal of %d bytes, want 2", n, goal())
	}
	if b.Changes != nil {
		t.Errorf("settle kept the batch's changes")
	}

	before = numGC()
	settle(&flow.Batch{Cause: flow.CauseChange})
	if n := numGC() - before; n >= 2 {
		t.Errorf("settle collected %d times after a batch of changes", n)
	}
	runtime.KeepAlive(live)
}

// settles' threshold: a heap at the runtime's default floor of 4 MiB is
// not collected, one of settleMin or more is. Unlike the test above, it
// does not depend on the test process's heap.
func TestSettles(t *testing.T) {
	for _, c := range []struct {
		goal uint64
		want bool
	}{{0, false}, {4 << 20, false}, {5 << 20, false}, {8<<20 - 1, false}, {8 << 20, true}, {64 << 20, true}} {
		if got := settles(c.goal); got != c.want {
			t.Errorf("settles(%d) = %v, want %v", c.goal, got, c.want)
		}
	}
}
