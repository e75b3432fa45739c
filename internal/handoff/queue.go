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
	"context"
	"hash/maphash"
	"math/bits"
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

// pending is a queued batch, possibly several merged.
type pending struct {
	// list is the changes of one change batch as it came (a copy), when
	// it holds each id once: most batches are read before another merges
	// into them, and a list costs less than a map to make, to hand over
	// and to collect (serve puts every change into every stream's queue;
	// one etcd transaction is one batch). Otherwise, and once merged
	// into, changes holds them, and list is nil. Next hands the list
	// itself to the reader.
	list    []flow.Change
	one     [1]flow.Change // list's array when it holds one change
	changes map[string]flow.Change
	cause   flow.Cause
	synced  bool
	rev     int64
	// confirmed: a batch merged into it was Confirmed; the merged batch
	// reflects a state at least as recent.
	confirmed bool
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

var _ flow.Sink = (*Queue)(nil)

// Put hands b to the reader. It never blocks. Put after Close is a no-op.
func (q *Queue) Put(b flow.Batch) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	switch {
	case b.Full():
		q.putFull(b)
	case len(q.changes) < q.maxQueued:
		p := &pending{cause: b.Cause}
		distinct := q.distinct(b.Changes)
		if distinct {
			p.list = q.spare(len(b.Changes)) // add copies b's changes into it
		}
		p.add(b, nil, distinct)
		q.changes = append(q.changes, p)
	default:
		into := q.changes[0]
		into.toMap()
		merged := 0
		for _, p := range q.changes[1:] {
			merged += into.merge(p, q.forgettable)
		}
		clear(q.changes[1:])
		q.changes = q.changes[:1]
		merged += into.add(b, q.forgettable, false)
		if merged > 0 && q.OnMerge != nil {
			q.OnMerge(merged)
		}
	}
	q.signal()
}

func (q *Queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// putFull replaces everything queued with the full batch b.
func (q *Queue) putFull(b flow.Batch) {
	next := &pending{changes: make(map[string]flow.Change, len(b.Changes)), cause: b.Cause}
	if q.full != nil && q.full.cause == flow.CauseInitial {
		next.cause = flow.CauseInitial // the reader has not had the first listing
	}
	next.add(b, nil, false)
	if slices.ContainsFunc(b.Changes, func(c flow.Change) bool { return c.Undecodable }) {
		// lastQueued looks the bad records up in every queued batch:
		// by id, not through lists of any length.
		for _, p := range q.changes {
			p.toMap()
		}
	}
	for id, c := range next.changes {
		if c.Deleted {
			delete(next.changes, id) // absence says it in a full batch
			continue
		}
		if !c.Undecodable {
			continue
		}
		switch last, ok := q.lastQueued(id); {
		case !ok:
			// Nothing unread: the reader has the last good state.
		case last.Deleted:
			delete(next.changes, id)
		default:
			next.changes[id] = last
		}
	}
	q.full = next
	clear(q.changes)
	q.changes = q.changes[:0]
}

// lastQueued returns the newest state of id that is queued and not
// Undecodable (a deletion included), and whether there is one.
func (q *Queue) lastQueued(id string) (flow.Change, bool) {
	for i := len(q.changes) - 1; i >= 0; i-- {
		if c, ok := q.changes[i].get(id); ok && !c.Undecodable {
			return c, true
		}
	}
	if q.full == nil {
		return flow.Change{}, false
	}
	c, ok := q.full.changes[id]
	switch {
	case !ok:
		return flow.Change{ID: id, Deleted: true}, true // absent from a full listing
	case c.Undecodable:
		return flow.Change{}, false
	}
	return c, true
}

// forgettable reports whether a deletion of id, merged into the oldest
// queued change batch, is news to nobody: the reader will not have id when
// it gets that batch.
func (q *Queue) forgettable(id string) bool {
	if q.full != nil {
		c, ok := q.full.changes[id]
		if !ok {
			return true
		}
		if !c.Undecodable {
			return false
		}
	}
	return !q.has(id)
}

// pairwiseUpTo is the most changes whose ids distinct compares pair by
// pair; above it, it finds them by their hashes in a table: one of
// seenTables for up to maxPooled of them, else a set of their own.
const (
	pairwiseUpTo = 16
	maxPooled    = 256
)

// seenTables are the tables distinct finds ids in, kept from one call to
// the next and shared by every queue (serve has one per stream): an
// entry is the high bits of an id's hash and its position (+1) in the
// batch, 0 if empty. A Go map of the ids cost a change four times as
// much, and the hand-off a twentieth of nodewatch's CPU while it
// followed transactions of 50 records of 200 B.
var seenTables = sync.Pool{New: func() any { return new([2 * maxPooled]uint64) }}

// seenSeed seeds the hashes of seenTables.
var seenSeed = maphash.MakeSeed()

// posBits are the low bits of a seenTables entry that hold a position.
const posBits = 9 // 1..maxPooled

// distinct reports whether cs holds each id once; q.mu must be held.
func (q *Queue) distinct(cs []flow.Change) bool {
	upTo := pairwiseUpTo
	if q.pairwiseAt > 0 {
		upTo = q.pairwiseAt
	}
	switch {
	case len(cs) <= upTo:
		for i := range cs {
			for j := i + 1; j < len(cs); j++ {
				if cs[i].ID == cs[j].ID {
					return false
				}
			}
		}
		return true
	case len(cs) > maxPooled:
		seen := make(map[string]struct{}, len(cs))
		for _, c := range cs {
			if _, dup := seen[c.ID]; dup {
				return false
			}
			seen[c.ID] = struct{}{}
		}
		return true
	}
	// Open addressing in a table at most half full: 2n slots and up,
	// a power of two.
	t := seenTables.Get().(*[2 * maxPooled]uint64)
	size := 2 << bits.Len(uint(len(cs)-1))
	table := t[:size]
	defer func() {
		clear(table)
		seenTables.Put(t)
	}()
	const posMask = 1<<posBits - 1
	mask := uint64(size - 1)
	for i := range cs {
		h := maphash.String(seenSeed, cs[i].ID)
		for k := h; ; k++ {
			e := &table[k&mask]
			if *e == 0 {
				*e = h&^posMask | uint64(i+1)
				break
			}
			if *e&^posMask == h&^posMask && cs[*e&posMask-1].ID == cs[i].ID {
				return false
			}
		}
	}
	return true
}

// add merges the later batch b into p, and returns the number of
// changes queued in p that its changes replaced; see put for forget. If
// p is empty and b's ids are distinct, p keeps b's changes as a list:
// a copy, made in p.list's array if Put gave it a spare (empty, with room).
func (p *pending) add(b flow.Batch, forget func(id string) bool, distinct bool) (merged int) {
	switch {
	case p.changes != nil || len(p.list) > 0 || forget != nil || !distinct:
		p.toMap()
		for _, c := range b.Changes {
			merged += p.put(c, forget)
		}
	case len(b.Changes) == 1:
		p.one[0] = b.Changes[0]
		p.list = p.one[:]
	default:
		p.list = append(p.list, b.Changes...)
	}
	p.synced = p.synced || b.Synced
	p.rev = max(p.rev, b.Rev)
	p.confirmed = p.confirmed || b.Confirmed
	return merged
}

// Spares: at most maxSpares arrays given back, none of more than
// maxSpareCap changes (a listing's is let go of). A reader that keeps up
// needs one: the source copies each batch into the array of the one the
// reader gave back before. One that fell behind gives back a batch for
// each queued one: following transactions of 50 records of 200 B with a
// --filter, with 4 spares kept a third of the batches were still copied
// into new arrays, with 16 none were (allocation profiles under make
// bench-compare).
const (
	maxSpares   = 16
	maxSpareCap = 1024
)

// Recycle gives back the changes of a change batch that Next returned
// and the reader has applied: the queue may copy a later batch into
// their array. The reader must not use cs, or anything that shares its
// array, once it gave it back. Readers that keep their batches do not
// call it.
func (q *Queue) Recycle(cs []flow.Change) {
	if cap(cs) < 2 || cap(cs) > maxSpareCap {
		return // a one-change batch's array is its pending's
	}
	clear(cs)
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.spares) < maxSpares {
		q.spares = append(q.spares, cs[:0])
	}
}

// spare returns an empty spare array with room for n changes, or nil;
// q.mu must be held.
func (q *Queue) spare(n int) []flow.Change {
	if n < 2 {
		return nil
	}
	for i := len(q.spares) - 1; i >= 0; i-- {
		if s := q.spares[i]; cap(s) >= n {
			q.spares[i] = q.spares[len(q.spares)-1]
			q.spares[len(q.spares)-1] = nil
			q.spares = q.spares[:len(q.spares)-1]
			return s
		}
	}
	return nil
}

// toMap moves p's list into its map.
func (p *pending) toMap() {
	if p.changes != nil {
		return
	}
	p.changes = make(map[string]flow.Change, len(p.list))
	for _, c := range p.list {
		p.changes[c.ID] = c
	}
	p.list, p.one = nil, [1]flow.Change{}
}

// len returns the number of changes p holds.
func (p *pending) len() int {
	if p.changes != nil {
		return len(p.changes)
	}
	return len(p.list)
}

// each calls fn with every change p holds, one per id.
func (p *pending) each(fn func(flow.Change)) {
	if p.changes != nil {
		for _, c := range p.changes {
			fn(c)
		}
		return
	}
	for _, c := range p.list {
		fn(c)
	}
}

// get returns p's change of id, and whether it holds one.
func (p *pending) get(id string) (flow.Change, bool) {
	if p.changes != nil {
		c, ok := p.changes[id]
		return c, ok
	}
	for _, c := range p.list {
		if c.ID == id {
			return c, true
		}
	}
	return flow.Change{}, false
}

// merge merges the later queued batch o into p, and returns the number
// of changes queued in p that o's changes replaced; see put for forget.
func (p *pending) merge(o *pending, forget func(id string) bool) (merged int) {
	p.toMap()
	o.each(func(c flow.Change) { merged += p.put(c, forget) })
	p.synced = p.synced || o.synced
	p.rev = max(p.rev, o.rev)
	p.confirmed = p.confirmed || o.confirmed
	return merged
}

// put merges the later change c into p, and returns 1 if it replaced (or,
// as a forgotten deletion, removed) a change queued for c.ID, else 0. If
// forget is set and says that a deletion of c.ID is news to nobody, the
// deletion leaves no trace.
func (p *pending) put(c flow.Change, forget func(id string) bool) int {
	_, queued := p.changes[c.ID]
	if queued && c.Undecodable {
		return 0 // the queued state is the last good one
	}
	if c.Deleted && forget != nil && forget(c.ID) {
		delete(p.changes, c.ID)
	} else {
		p.changes[c.ID] = c
	}
	if queued {
		return 1
	}
	return 0
}

// Close tells the reader that no more batches will come: Next returns what
// is queued first, then err (context.Canceled if err is nil). Close after
// Close is a no-op.
func (q *Queue) Close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	if err == nil {
		err = context.Canceled
	}
	q.err = err
	q.signal()
}

// Next blocks until a batch is queued and returns the oldest. It returns
// ctx.Err() when ctx ends first, and the error given to Close once the
// queue is closed and drained; with a context that never ends
// (context.Background()) it waits for the queue alone, which costs less
// (serve's streams, which every change wakes, Close their queues when
// they end instead). The changes of a batch come in no
// particular order, one per id. The reader must apply every batch it gets:
// the queue counts what it handed over as applied.
func (q *Queue) Next(ctx context.Context) (flow.Batch, error) {
	for {
		q.mu.Lock()
		if p := q.pop(); p != nil {
			var into []flow.Change // a merged change batch's, if a spare has room
			if p.changes != nil && p.cause == flow.CauseChange {
				into = q.spare(len(p.changes))
			}
			q.mu.Unlock()
			b := flow.Batch{Cause: p.cause, Synced: p.synced, Rev: p.rev, Confirmed: p.confirmed, Changes: p.list}
			switch {
			case b.Changes == nil && p.changes == nil:
				b.Changes = []flow.Change{}
			case p.changes != nil:
				if b.Changes = into; into == nil {
					b.Changes = make([]flow.Change, 0, len(p.changes))
				}
				for _, c := range p.changes {
					b.Changes = append(b.Changes, c)
				}
			}
			return b, nil
		}
		closed, err := q.closed, q.err
		q.mu.Unlock()
		if closed {
			return flow.Batch{}, err
		}
		done := ctx.Done()
		if done == nil {
			<-q.ready // cheaper than a select, for a reader that many queues wake
			continue
		}
		select {
		case <-done:
			return flow.Batch{}, ctx.Err()
		case <-q.ready:
		}
	}
}

// Waiting reports whether Next would return a change batch at once (a
// full batch, which may take long to apply, does not count). The reader
// of `key` and `nodes` asks before it writes out the lines of the batch
// it printed, to write out several batches in one write while it is
// behind.
func (q *Queue) Waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.full == nil && len(q.changes) > 0
}

// pop removes the oldest queued batch and records what the reader has
// once it has applied it; nil if nothing is queued. q.mu must be held.
func (q *Queue) pop() *pending {
	if p := q.full; p != nil {
		q.full = nil
		next := make(map[string]struct{}, len(p.changes))
		for id, c := range p.changes {
			if !c.Undecodable || q.has(id) {
				next[id] = struct{}{}
			}
		}
		q.handed, q.base, q.gone = next, nil, nil
		return p
	}
	if len(q.changes) == 0 {
		return nil
	}
	p := q.changes[0]
	q.changes[0] = nil
	q.changes = q.changes[1:]
	p.each(func(c flow.Change) {
		switch {
		case c.Deleted:
			q.hand(c.ID, false)
		case !c.Undecodable:
			q.hand(c.ID, true)
		}
	})
	return p
}

// queued returns the number of batches and of changes queued (for tests).
func (q *Queue) queued() (batches, changes int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.full != nil {
		batches, changes = 1, len(q.full.changes)
	}
	for _, p := range q.changes {
		batches++
		changes += p.len()
	}
	return batches, changes
}
