package watch

import (
	"runtime"
	"runtime/metrics"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// settle collects, once a full batch b is applied, the garbage it
// leaves: the listing's pages, its changes and the batch, together often
// larger than the view they made. Left to the runtime, they would set the
// heap's goal at twice their peak for as long as the watch runs; for
// 1,000 records of 4 KiB, the goal went from 30 MB to 14 MB, and the peak
// RSS of a run from 50 MB to 47 MB. It lets go of b's changes first: the
// caller's b would keep them reachable. Twice, because gRPC keeps the
// pages' buffers in pools that the first collection only moves aside. It
// costs two collections per listing, which allocated more than the view
// anyway; but not while the heap's goal is below settleMin (settles).
func settle(b *flow.Batch) {
	if !b.Full() {
		return
	}
	b.Changes = nil
	if goal, ok := heapGoal(); ok && !settles(goal) {
		return
	}
	runtime.GC() // also when the goal cannot be read
	runtime.GC()
}

// heapGoal returns the runtime's heap goal in bytes; false if it cannot
// be read.
func heapGoal() (uint64, bool) {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}

// settles reports whether settle collects under a heap goal of goal
// bytes: from settleMin on. The goal bounds what a collection can give
// back, as the heap does not grow far past it before the runtime
// collects on its own; and by default the goal is never below 4 MiB, so
// below settleMin there are at most a few MiB to give back. There the
// two collections (their page faults included) cost 7 ms of CPU, a tenth
// of the start of a watch of 1,000 records of 200 B, whose goal was 4–5
// MiB, and gave nothing back.
func settles(goal uint64) bool { return goal >= settleMin }

// settleMin is the smallest heap goal under which settle collects.
const settleMin = 8 << 20
