package handoff

import (
	"context"

	"github.com/nodewatch/nodewatch/internal/fast"
	"github.com/nodewatch/nodewatch/internal/flow"
)

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
	if !fast.On(fast.Pool) {
		return // every array is the garbage collector's
	}
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
