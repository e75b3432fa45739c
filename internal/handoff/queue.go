// Package handoff carries batches from a source to the one reader that
// applies them, without ever blocking the source and without queueing
// without bound.
//
// Every path of nodewatch has one: the etcd watcher or the Curator client
// feeding the follower of `key`, `nodes` and `node`; the etcd watcher
// feeding `serve`; and `serve` feeding each of its Watch streams, the
// backlog included. A source must keep reading its connection (etcd and
// gRPC buffer without limit inside their clients otherwise), while the
// reader may be as slow as the pipe behind stdout or the HTTP/2 window of
// a client that stopped reading.
//
// # The rule
//
// Whatever the queue merges under backpressure, the batches the reader
// gets, applied in order, leave it after each batch at a state the source
// really had, and, once the reader has caught up, at the source's state.
// Memory is bounded by the number of ids, not by the number of updates.
//
// The queue can keep that promise because it is the only way to the
// reader: it remembers which ids it has handed over as present (the
// reader's view, ids only), so it knows which deletions are news to the
// reader and which are not. Everything the reader applies must come
// through Next, the first full state included, unless the queue was made
// by NewFrom with the ids of what the reader applied before.
package handoff

import (
	"slices"
	"sync"

	"github.com/nodewatch/nodewatch/internal/flow"
)

// DefaultMaxQueued is how many change batches a Queue keeps apart before
// it merges them.
const DefaultMaxQueued = 64

// Queue is the hand-off between one source and one reader.
//
// What it does with the batches it holds:
//
//   - Change batches are kept as the source made them (one etcd
//     transaction, one Curator event), up to MaxQueued of them. When one
//     more arrives, the queued change batches merge into one, per id: the
//     latest state wins, and a deletion of an id that the reader does not
//     have when it gets the merged batch is dropped (it is news to nobody).
//   - A full batch (initial listing or resync) replaces everything
//     queued: it is the whole state. If the reader has not yet had the
//     initial listing, the replacement is still the initial one, so that
//     --changes-only never takes changes for the initial state.
//   - An Undecodable change (a bad record) stands for "the last good state
//     of this id", so it never replaces a queued state of its id. In a full
//     batch it takes the newest queued state of its id that the reader has
//     not had yet: a good state is carried over, a deletion (or absence
//     from a queued full batch) leaves the id out; with nothing queued it
//     stays Undecodable, and the reader keeps what it has.
//
// Put and Close are called by the source (one goroutine or several), Next
// by one reader. All methods are safe for concurrent use.
type Queue struct {
	maxQueued int
	ready     chan struct{} // capacity 1: "something changed"

	mu      sync.Mutex // guards the fields below
	full    *pending   // an unread full batch, the oldest thing queued; nil if none
	changes []*pending // unread change batches after full, oldest first
	// The ids the reader has as present after the batches Next returned
	// so far: those in handed, and those in base that are not in gone.
	// base is NewFrom's (nil after New, and once rebased).
	handed map[string]struct{}
	base   []string
	gone   map[string]struct{}
	// rebaseAt, if set, replaces what rebaseAfter says; pairwiseAt, if
	// set, replaces pairwiseUpTo (test hooks).
	rebaseAt   int
	pairwiseAt int
	closed     bool
	err        error
	// spares are arrays of batches the reader gave back (Recycle), for
	// the next batches to be copied into; empty, at most maxSpares.
	spares [][]flow.Change

	// OnMerge, if set, is told how many queued changes a merge replaced:
	// changes the reader will never get, because a later change of the
	// same id took their place. It is called with the queue locked; set
	// it before the first Put.
	OnMerge func(n int)
}

// New returns an empty Queue that keeps up to maxQueued change batches
// apart; 0 means DefaultMaxQueued, and values below 2 mean 2.
func New(maxQueued int) *Queue {
	if maxQueued == 0 {
		maxQueued = DefaultMaxQueued
	}
	return &Queue{
		maxQueued: max(maxQueued, 2),
		ready:     make(chan struct{}, 1),
		handed:    map[string]struct{}{},
	}
}

// NewFrom is New for a reader that already has the ids in base, in
// order, by other means than this queue: serve sends every stream that
// starts at the same state the same encoded backlog, and starts its queue
// from that backlog's ids, shared by all of them. The queue never modifies
// base, and must be the only way to the reader from then on. It keeps a
// reference to base until as many ids have come and gone since as base
// holds, and then a set of its own, as New's queue does.
func NewFrom(maxQueued int, base []string) *Queue {
	q := New(maxQueued)
	q.base = base
	q.gone = map[string]struct{}{}
	return q
}

// has reports whether the reader has id as present; q.mu must be held.
func (q *Queue) has(id string) bool {
	if _, ok := q.handed[id]; ok {
		return true
	}
	if q.base == nil {
		return false
	}
	if _, ok := q.gone[id]; ok {
		return false
	}
	_, ok := slices.BinarySearch(q.base, id)
	return ok
}

// hand records that the reader has id as present (present) or not;
// q.mu must be held.
func (q *Queue) hand(id string, present bool) {
	if q.base == nil {
		if present {
			// Most changes are to ids the reader has: a lookup, which
			// costs less than assigning the id again.
			if _, ok := q.handed[id]; !ok {
				q.handed[id] = struct{}{}
			}
		} else {
			delete(q.handed, id)
		}
		return
	}
	if _, inBase := slices.BinarySearch(q.base, id); inBase {
		if present {
			if len(q.gone) > 0 {
				delete(q.gone, id)
			}
		} else {
			q.gone[id] = struct{}{}
		}
	} else if present {
		q.handed[id] = struct{}{}
	} else {
		delete(q.handed, id)
	}
	if len(q.handed)+len(q.gone) > q.rebaseAfter() {
		q.rebase()
	}
}

// rebaseAfter is how many ids may differ from base before the queue
// keeps a set of its own.
func (q *Queue) rebaseAfter() int {
	if q.rebaseAt > 0 {
		return q.rebaseAt
	}
	return 64 + len(q.base)
}

// rebase copies what the reader has into handed and lets go of base;
// q.mu must be held.
func (q *Queue) rebase() {
	for _, id := range q.base {
		if _, ok := q.gone[id]; !ok {
			q.handed[id] = struct{}{}
		}
	}
	q.base, q.gone = nil, nil
}
